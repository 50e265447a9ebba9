"""Snapshot tests: one SVG per visible state (pytest-textual-snapshot).

Fixed terminal size, animations and cursor blink off, live queue figures
frozen, no toasts; nothing in the picture depends on the clock, a temp path,
a random port or a random id. SVGs live in tests/snapshots/test_snapshots/;
regenerate with `pytest tests/tui/test_snapshots.py --snapshot-update` and
review the pictures before committing them.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_textual_snapshot
from textual.widgets import Input, TextArea

from ktui.core.models import ItemInput, ItemPhase, QueueStats
from ktui.core.transfer import EXPORT_FORMAT
from ktui.tui.app import KtuiApp
from ktui.tui.widgets.key_footer import KeyFooter
from ktui.tui.widgets.status_line import StatusLine
from tests.support.embedding_server import EmbeddingServerHandle, start_embedding_server
from tests.tui.conftest import DIMS, MODEL, make_settings, until

SIZE = (120, 40)
SMALL, MEDIUM, LARGE = (80, 24), (120, 40), (200, 60)
SNAPSHOT_DIR = Path(__file__).resolve().parent.parent / "snapshots"


class _SnapshotsDir(pytest_textual_snapshot.SVGImageExtension):
    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(SNAPSHOT_DIR / test_location.basename)


@pytest.fixture(autouse=True)
def _svgs_in_tests_snapshots(monkeypatch):
    monkeypatch.setattr(pytest_textual_snapshot, "SVGImageExtension", _SnapshotsDir)


FIXED_ROOT = Path("/tmp/ktui-tui-snapshots")
"""A fixed location: similar-items scores embed the item's source path, so a random
tmp_path would change the figures in the picture from run to run."""


@pytest.fixture
def corpus() -> Iterator[Path]:
    # the fixed path is shared by every test process (pytest -n 2): hold a lock for the test
    lock = open(f"{FIXED_ROOT}.lock", "w")  # noqa: SIM115 - closed (and unlocked) below
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        yield from _fixed_corpus()
    finally:
        lock.close()


def _fixed_corpus() -> Iterator[Path]:
    shutil.rmtree(FIXED_ROOT, ignore_errors=True)
    tmp_path = FIXED_ROOT
    root = tmp_path / "corpus"
    (root / "guides").mkdir(parents=True)
    (root / "apples.md").write_text("# Apples\n\nApples grow on trees in the orchard and are picked in autumn.\n")
    (root / "pears.md").write_text("# Pears\n\nPears ripen after picking; keep them in a cool cellar.\n")
    (root / "guides" / "storage.md").write_text(
        "# Storage\n\nStore apples and pears apart: apples release ethylene.\n\n"
        "## Cellar\n\nA cellar at four degrees keeps fruit for months.\n")
    (tmp_path / "blob.dat").write_bytes(bytes(range(256)) * 4)  # a file that fails: unsupported type
    yield root
    shutil.rmtree(FIXED_ROOT, ignore_errors=True)


async def calm(pilot, done: int = 0, failed: int = 0) -> None:
    """Remove everything that varies from run to run, once every footer shows the keys of now."""
    app: KtuiApp = pilot.app
    await until(lambda: all(f.settled for screen in app.screen_stack for f in screen.query(KeyFooter)), pilot,
                what="footers settled")
    app.animation_level = "none"
    for widget in app.screen.query(Input):
        widget.cursor_blink = False
    for widget in app.screen.query(TextArea):
        widget.cursor_blink = False
        # with blink off the cursor is drawn iff focused, but TextArea's line cache is keyed without
        # the focus: a line cached in the blink's "off" phase would be reused without its cursor
        widget.notify_style_update()  # (public; clears that cache)
        widget.refresh()
    for screen in app.screen_stack:
        for widget in screen.query(Input):
            widget.cursor_blink = False
    app.query_one(StatusLine).freeze(QueueStats(0, 0, done, failed, 0.0))
    app.clear_notifications()
    for screen in app.screen_stack:
        for widget in screen.query("#detail"):
            widget.display = False  # item details show the item's times
    await pilot.pause()


async def indexed(pilot, corpus: Path, *, expand: bool = True):
    app: KtuiApp = pilot.app
    await until(lambda: app.ready, pilot)
    base = await app.ks.create_base("Orchard", MODEL, None, emoji="🍎")
    app._select_base(base)
    await until(lambda: app.item_tree.base_id == base.id, pilot)
    await app.ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
    await app.ks.add_items(base.id, [ItemInput("note", {"content": "Quince jelly needs a long, slow boil."})])
    await app.ks.add_items(base.id, [ItemInput("file", {"path": str(corpus.parent / "blob.dat")})])
    assert await app.ks.wait_idle(timeout=15)
    await until(lambda: len(app.item_tree.nodes_by_id) == 3 and all(n.data.status.is_terminal
                                                                for n in app.item_tree.nodes_by_id.values()), pilot)
    if expand:
        folder = next(n for n in app.item_tree.nodes_by_id.values() if n.data.item.type.value == "directory")
        folder.expand()
        await until(lambda: len(app.item_tree.nodes_by_id) >= 6, pilot)
        guides = next(n for n in app.item_tree.nodes_by_id.values() if n.data.item.display_name == "guides")
        guides.expand()
        await until(lambda: len(app.item_tree.nodes_by_id) >= 7, pilot)
        app.item_tree.focus()
        app.item_tree.move_cursor(folder)
    await pilot.pause()
    return base


def test_empty_app(snap_compare, settings):
    async def run_before(pilot):
        await until(lambda: pilot.app.ready, pilot)
        await calm(pilot)

    assert snap_compare(KtuiApp(settings), terminal_size=SMALL, run_before=run_before)


@pytest.mark.parametrize("size", [SMALL, MEDIUM, LARGE], ids=["80x24", "120x40", "200x60"])
def test_items_search_and_failed_item(snap_compare, settings, corpus, size):
    async def run_before(pilot):
        app = pilot.app
        await indexed(pilot, corpus)
        await pilot.press("slash", *"apples cellar", "enter")
        await until(lambda: app.search_pane.results, pilot)
        app.item_tree.focus()
        await calm(pilot, done=6, failed=1)

    assert snap_compare(KtuiApp(settings), terminal_size=size, run_before=run_before)


def test_item_mid_indexing(snap_compare, settings, corpus, embedding_server):
    async def run_before(pilot):
        app = pilot.app
        await until(lambda: app.ready, pilot)
        base = await app.ks.create_base("Orchard", MODEL, None, emoji="🍎")
        app._select_base(base)
        await until(lambda: app.item_tree.base_id == base.id, pilot)
        # hold the embedding request past the picture: only the client's own timeout (60 s) or the
        # app's shutdown ends it, so a slow machine cannot let the item complete first (3 s could)
        embedding_server.faults.delay(120)
        (item,) = await app.ks.add_items(base.id, [ItemInput("file", {"path": str(corpus / "apples.md")})])
        await until(lambda: item.id in app.item_tree.nodes_by_id
                    and app.item_tree.nodes_by_id[item.id].data.phase == ItemPhase.EMBEDDING, pilot)
        app.item_tree.focus()
        await calm(pilot)
        await calm(pilot)  # a late stats event must not change the picture
        app.query_one(StatusLine).frozen = True

    try:
        assert snap_compare(KtuiApp(settings), terminal_size=SIZE, run_before=run_before)
    finally:
        embedding_server.faults.clear()


def test_failed_base_offers_restore(snap_compare, settings):
    async def run_before(pilot):
        app = pilot.app
        await until(lambda: app.ready, pilot)
        await app.ks.import_bases({"format": EXPORT_FORMAT, "version": 1, "bases": [{
            "name": "Archive", "embedding_model_id": "gone::model", "dimensions": 8, "emoji": "🗄",
            "group": "Old", "items": [{"type": "note", "data": {"content": "Old notes about walnuts"}}]}]})
        await app.ks.create_base("Orchard", MODEL, None, emoji="🍎")
        app.reload_bases()
        await until(lambda: len(app.bases_pane.bases) == 2 and app.item_tree.nodes_by_id, pilot)
        await calm(pilot)

    assert snap_compare(KtuiApp(settings), terminal_size=SIZE, run_before=run_before)


def dialog_test(keys: tuple[str, ...], ready, *, prepare=None, expand=False):
    """A snapshot of a dialog opened with `keys` over an indexed base, once `ready(app)` holds."""

    def test(snap_compare, settings, corpus):
        async def run_before(pilot):
            app = pilot.app
            await indexed(pilot, corpus, expand=expand)
            if prepare is not None:
                await prepare(pilot)
            await pilot.press(*keys)
            await until(lambda: ready(app), pilot)
            await calm(pilot, done=6, failed=1)

        assert snap_compare(KtuiApp(settings, start_dir=corpus), terminal_size=SMALL, run_before=run_before)

    return test


def _dims_detected(app) -> bool:
    return app.screen.query("#dimensions") and app.screen.query_one("#dimensions", Input).value == "32"


test_create_base_dialog = dialog_test(("n",), _dims_detected)
test_edit_base_dialog = dialog_test(("e",), lambda app: app.screen.query("#name"))
test_help_screen = dialog_test(("f1",), lambda app: app.screen.query("#keys"))


async def _focus_leaf(pilot):
    app = pilot.app
    leaf = next(n for n in app.item_tree.nodes_by_id.values() if n.data.item.display_name == "storage.md")
    app.item_tree.focus()
    app.item_tree.move_cursor(leaf)
    await pilot.pause()


test_confirm_delete_dialog = dialog_test(("d",), lambda app: app.screen.query("#yes"), prepare=_focus_leaf,
                                         expand=True)
test_chunk_browser = dialog_test(
    ("c",), lambda app: bool(getattr(app.screen, "chunks", None)),
    prepare=_focus_leaf, expand=True)
test_similar_items_dialog = dialog_test(
    ("s",), lambda app: app.screen.query("#similar-list") and app.screen.query_one("#similar-list").option_count,
    prepare=_focus_leaf, expand=True)


async def _note_tab(pilot):
    pilot.app.last_add_tab = "note"  # the dialog reopens on the tab used last


def _add_dialog_note(app) -> bool:
    if not app.screen.query("#note-text"):
        return False
    area = app.screen.query_one("#note-text", TextArea)
    if not area.text:
        area.text = "Plums: pick them when they come away with a gentle twist."
        return False
    if not area.has_focus:
        area.focus()
        return False
    # the tab switch is applied asynchronously: wait until the editor is really laid out
    return area.cursor_location == (0, 0) and area.region.width > 0 and area.region.height > 0


test_add_items_dialog = dialog_test(("a",), _add_dialog_note, prepare=_note_tab)


def test_chunk_in_context(snap_compare, settings, corpus):
    async def run_before(pilot):
        app = pilot.app
        await indexed(pilot, corpus, expand=False)
        await pilot.press("slash", *"cellar four degrees", "enter")
        await until(lambda: app.search_pane.results, pilot)
        app.query_one("#results").focus()
        await pilot.press("enter")
        await until(lambda: app.screen.query("#context") and "months" in str(
            app.screen.query_one("#context").render()), pilot)
        await calm(pilot, done=6, failed=1)

    assert snap_compare(KtuiApp(settings), terminal_size=SMALL, run_before=run_before)


def test_restore_dialog(snap_compare, settings):
    async def run_before(pilot):
        app = pilot.app
        await until(lambda: app.ready, pilot)
        await app.ks.import_bases({"format": EXPORT_FORMAT, "version": 1, "bases": [{
            "name": "Archive", "embedding_model_id": "gone::model", "dimensions": 8,
            "items": [{"type": "note", "data": {"content": "Old notes about walnuts"}}]}]})
        app.reload_bases()
        await until(lambda: app.bases_pane.current_base is not None, pilot)
        await pilot.press("R")
        await until(lambda: app.screen.query("#dimensions") and
                    app.screen.query_one("#dimensions", Input).value == "32", pilot)
        await calm(pilot)

    assert snap_compare(KtuiApp(settings), terminal_size=SIZE, run_before=run_before)


def test_failed_item_with_a_long_error(snap_compare, settings, corpus):
    """A failed item's error is cut at the pane's edge in the tree; its details show all of it."""

    async def run_before(pilot):
        app = pilot.app
        await until(lambda: app.ready, pilot)
        base = await app.ks.create_base("Orchard", MODEL, None, emoji="🍎")
        app._select_base(base)
        await until(lambda: app.item_tree.base_id == base.id, pilot)
        deep = corpus / ("very-long-folder-name-" * 6)
        deep.mkdir()
        await app.ks.add_items(base.id, [ItemInput("file", {"path": str(corpus.parent / "blob.dat")})])
        await app.ks.add_items(base.id, [ItemInput("directory", {"path": str(deep)})])  # empty: fails
        assert await app.ks.wait_idle(timeout=15)
        await until(lambda: len(app.item_tree.nodes_by_id) == 2 and all(
            n.data.status.is_terminal for n in app.item_tree.nodes_by_id.values()), pilot)
        app.item_tree.focus()
        await pilot.press("i")
        await until(lambda: app.screen.query("#detail") and "Error" in str(app.screen.query_one("#detail").render()),
                    pilot)
        await pilot.press("escape")
        await calm(pilot, failed=2)

    assert snap_compare(KtuiApp(settings), terminal_size=SMALL, run_before=run_before)


DEGRADED_PORT = 28471
"""The degraded banner quotes the provider's error, URL and port included: a fixed port (below
Linux's ephemeral range, used only while the corpus lock is held) keeps the picture stable."""


@pytest.fixture
def fixed_port_server(corpus) -> Iterator[EmbeddingServerHandle]:
    handle = start_embedding_server(DIMS, port=DEGRADED_PORT)
    try:
        yield handle
    finally:
        handle.stop()


def test_degraded_results_say_keyword_only(snap_compare, tmp_path, corpus, fixed_port_server):
    server = fixed_port_server
    settings = make_settings(tmp_path / "data", server)

    async def run_before(pilot):
        app = pilot.app
        await indexed(pilot, corpus, expand=False)
        server.faults.fail(500, times=10)
        await pilot.press("slash", *"cellar", "enter")
        await until(lambda: app.search_pane.results, pilot)
        app.query_one("#results").focus()
        await calm(pilot, done=6, failed=1)

    try:
        assert snap_compare(KtuiApp(settings), terminal_size=MEDIUM, run_before=run_before)
    finally:
        server.faults.clear()


HOSTILE_BASES = ["Team [link=http://x]wiki", "N [/]", "Docs [@click=app.quit]x", "[b]unclosed"]


def test_hostile_names_are_shown_literally(snap_compare, settings, corpus):
    """The worst names: markup, an unbalanced tag, a click action, an escape sequence, CJK, RTL, emoji."""

    async def run_before(pilot):
        app = pilot.app
        await until(lambda: app.ready, pilot)
        for name in HOSTILE_BASES:
            await app.ks.create_base(name, MODEL, None)
        base = await app.ks.create_base("日本語 שלום 👩‍👩‍👧", MODEL, None)
        app._select_base(base)
        await until(lambda: app.item_tree.base_id == base.id, pilot)
        (corpus / "Meeting notes [draft].md").write_text("# [b]Agenda[/b]\n\nThe [link=http://a]plan[/] is set.\n")
        await app.ks.add_items(base.id, [ItemInput("file", {"path": str(corpus / "Meeting notes [draft].md")})])
        await app.ks.add_items(base.id, [ItemInput("note", {"content": "[link=http://a] [/] \x1b[2J\ttab\nbody"})])
        assert await app.ks.wait_idle(timeout=15)
        await until(lambda: len(app.item_tree.nodes_by_id) == 2, pilot)
        await pilot.press("slash", *"[/] plan", "enter")
        await until(lambda: app.search_pane.results, pilot)
        app.item_tree.focus()
        await calm(pilot, done=2)

    assert snap_compare(KtuiApp(settings), terminal_size=MEDIUM, run_before=run_before)

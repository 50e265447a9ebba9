"""A base whose store file is damaged or missing says so in the TUI and is rebuilt from the keyboard.

Real files: a base is indexed through the facade, its `<id>.sqlite` is then corrupted
(its header overwritten) or deleted on disk — as the issue-16 fault tests do — and the
app is opened on that data directory.
"""

from __future__ import annotations

import os

import pytest
from textual.widgets import Input

from ktui.core.models import ItemInput
from ktui.core.service import KnowledgeService
from ktui.tui.app import KtuiApp
from ktui.tui.screens.confirm import ConfirmScreen
from tests.tui.conftest import MODEL, until

SIZE = (80, 24)


def _damage(path, how: str) -> None:
    if how == "corrupt":
        with open(path, "r+b") as fh:
            fh.write(os.urandom(8192))
    else:
        path.unlink()
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def _prompt(app: KtuiApp, base_id: str) -> str:
    pane = app.bases_pane
    return str(pane.get_option_at_index(pane.get_option_index(base_id)).prompt)


@pytest.mark.parametrize("how", ["corrupt", "missing"])
async def test_a_damaged_store_is_shown_and_rebuilt_from_the_keyboard(settings, how):
    async with await KnowledgeService.open(settings=settings) as ks:
        base = await ks.create_base("Harbour", MODEL, None)
        await ks.add_items(base.id, [ItemInput("note", {"content": f"The cormorant dives in harbour {n}."})
                                     for n in range(3)])
        assert await ks.wait_idle(timeout=60)
    store_file = settings.data_dir / "bases" / f"{base.id}.sqlite"
    _damage(store_file, how)

    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.bases_pane.current_base is not None and app.item_tree.nodes_by_id, pilot,
                    what="base and items listed")
        if how == "corrupt":
            # a damaged file is found when the store is first opened: here, by a search
            await pilot.press("slash", *"cormorant", "enter")
        await until(lambda: "needs a rebuild" in _prompt(app, base.id), pilot, what="marker in the bases pane")
        assert "Ctrl+R reindexes all" in _prompt(app, base.id)
        # the status line says why (it replaces the failed search's message, which said the same)
        status = str(app.query_one("#search-status").render())
        problem = app.bases_pane.current_base.store_problem
        assert problem and ("missing" in problem if how == "missing" else "corrupt" in problem.lower()
                            or "kept as" in problem)
        assert "store needs a rebuild" in status and str(store_file.name) in status  # the reason, whole

        app.bases_pane.focus()
        await pilot.pause()
        assert "reindex_base" in app.query_one("KeyFooter").shown_actions or \
            "reindex_base" in app.query_one("KeyFooter").left_out  # a key on this screen (F1 lists it)
        await pilot.press("ctrl+r")
        await until(lambda: isinstance(app.screen, ConfirmScreen), pilot, what="asks first")
        await pilot.press("y")
        await until(lambda: not app.bases_pane.current_base.needs_rebuild, pilot, what="rebuilt")
        assert "needs a rebuild" not in _prompt(app, base.id)
        assert await app.ks.wait_idle(timeout=60)
        await pilot.press("slash")
        app.query_one("#query", Input).value = "cormorant"
        await pilot.press("enter")
        await until(lambda: len(app.search_pane.results) == 3, pilot, what="searchable again")
        assert app.is_running

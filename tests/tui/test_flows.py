"""Pilot tests: every user flow of the TUI against a real KnowledgeService.

The service runs on tmp_path with the deterministic embedding server as its
"fake" provider; URLs and sitemaps are served by a real HTTP server on
127.0.0.1. The tests press keys like a user and then check both the screen
(widgets) and the service's own state.
"""

from __future__ import annotations

import pytest
from textual.widgets import DirectoryTree, Input, Switch, TextArea

from ktui.core.models import ANY_GROUP, BaseStatus, ItemInput, ItemStatus
from ktui.core.transfer import EXPORT_FORMAT
from ktui.tui.app import KtuiApp
from ktui.tui.screens.add_items import AddItemsScreen
from ktui.tui.screens.base_form import BaseFormScreen
from ktui.tui.screens.chunks import ChunkBrowserScreen, ChunkContextScreen
from ktui.tui.screens.confirm import ConfirmScreen
from ktui.tui.screens.help import HelpScreen
from ktui.tui.screens.restore import RestoreScreen
from ktui.tui.screens.similar import SimilarScreen
from ktui.tui.widgets.item_tree import node_label
from tests.support.httpserver import Response, routes, serve
from tests.tui.conftest import MODEL, until

SIZE = (120, 36)


async def started(app: KtuiApp, pilot) -> None:
    await until(lambda: app.ready, pilot, what="service open")


async def with_base(app: KtuiApp, pilot, name: str = "Fruit"):
    base = await app.ks.create_base(name, MODEL, None)
    app._select_base(base)
    await until(lambda: app.item_tree.base_id == base.id, pilot, what="base selected")
    return base


def labels(app: KtuiApp) -> dict[str, str]:
    return {i: n.label.plain for i, n in app.item_tree.nodes_by_id.items()}


async def all_done(app: KtuiApp, pilot, n: int, timeout: float = 15) -> None:
    def done() -> bool:
        nodes = [n.data for n in app.item_tree.nodes_by_id.values()]
        return len(nodes) >= n and all(d.status.is_terminal for d in nodes)

    await until(done, pilot, timeout, what=f"{n} items terminal in the tree")


async def test_create_base_through_the_dialog(settings):
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("n")
        assert isinstance(app.screen, BaseFormScreen)
        form = app.screen
        # the model list and the detected dimensions arrive from the service
        await until(lambda: form.query_one("#dimensions", Input).value == "32", pilot, what="dimensions")
        await pilot.press("ctrl+s")  # empty name: the service's ValidationError shows, the dialog stays
        await until(lambda: "name" in str(form.query_one(".dialog-error").render()), pilot, what="error")
        assert app.screen is form
        await pilot.press(*"Orchard")
        form.query_one("#group", Input).value = "Farming"
        form.query_one("#document_count", Input).value = "5"
        await pilot.press("ctrl+s")
        await until(lambda: not isinstance(app.screen, BaseFormScreen), pilot, what="dialog closed")
        await until(lambda: app.bases_pane.current_base is not None, pilot, what="base listed")
        base = app.bases_pane.current_base
        assert base.name == "Orchard" and base.embedding_model_id == MODEL and base.dimensions == 32
        assert base.document_count == 5
        groups = await app.ks.list_groups()
        assert [g.name for g in groups] == ["Farming"] and base.group_id == groups[0].id
        assert app.search_pane.top_k == 5
        # edit: rename it
        await pilot.press("e")
        form = app.screen
        assert isinstance(form, BaseFormScreen) and form.editing
        form.query_one("#name", Input).value = "Orchard 2"
        await pilot.press("ctrl+s")
        await until(lambda: app.bases_pane.current_base.name == "Orchard 2", pilot, what="renamed")


async def test_add_a_file_picked_in_the_file_tree_and_watch_it_complete(settings, docs):
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await with_base(app, pilot)
        await pilot.press("a")
        assert isinstance(app.screen, AddItemsScreen)
        tree = app.screen.query_one("#file-tree", DirectoryTree)
        await until(lambda: tree.last_line >= 2, pilot, what="file tree loaded")
        tree.focus()
        # the tree lists alpha.md, beta.md, guide/ sorted dirs-first: move to alpha.md
        for _ in range(3):
            if tree.cursor_node and tree.cursor_node.data and tree.cursor_node.data.path.name == "alpha.md":
                break
            await pilot.press("down")
        await pilot.press("enter")
        path_input = app.screen.query_one("#file-path", Input)
        await until(lambda: path_input.value.endswith("alpha.md"), pilot, what="path picked")
        await pilot.press("ctrl+s")
        await until(lambda: not isinstance(app.screen, AddItemsScreen), pilot, what="dialog closed")
        await all_done(app, pilot, 1)
        (label,) = labels(app).values()
        assert label.startswith("📄 ✔ alpha.md")
        await until(lambda: app.bases_pane.counts.get(app.item_tree.base_id) == 1, pilot, what="item count")


async def test_add_a_folder_with_watch_and_expand_its_children(settings, docs):
    app = KtuiApp(settings, start_dir=docs.parent)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        app.last_add_tab = "folder"
        await pilot.press("a")
        screen = app.screen
        screen.query_one("#folder-path", Input).value = str(docs)
        screen.query_one("#watch", Switch).value = True
        await pilot.press("ctrl+s")
        await until(lambda: not isinstance(app.screen, AddItemsScreen), pilot, what="dialog closed")
        assert await app.ks.wait_idle(timeout=15)
        await all_done(app, pilot, 1)
        (root_id,) = app.item_tree.nodes_by_id
        assert "👁" in labels(app)[root_id]  # watched
        app.item_tree.focus()
        app.item_tree.move_cursor(app.item_tree.nodes_by_id[root_id])
        await pilot.press("space")  # expand: children load lazily
        await until(lambda: len(app.item_tree.nodes_by_id) >= 4, pilot, what="children loaded")
        await pilot.press("j", "j")  # vim keys move in the tree
        assert app.item_tree.cursor_line == 2
        names = {n.data.item.display_name for n in app.item_tree.nodes_by_id.values()}
        assert {"alpha.md", "beta.md", "guide"} <= names
        total = (await app.ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).total
        assert total == 5  # docs, alpha, beta, guide, gamma
        # stop watching the folder from the keyboard
        app.item_tree.move_cursor(app.item_tree.nodes_by_id[root_id])
        await pilot.pause()
        await pilot.press("w")
        await until(lambda: "👁" not in labels(app)[root_id], pilot, what="watch off")
        assert (await app.ks.get_item(root_id)).data.watch is False


@pytest.mark.slow
async def test_add_a_note_url_and_sitemap(settings):
    page = "<html><head><title>Pears</title></head><body><article><h1>Pears</h1>" + \
        "<p>Pears are sweet fruits harvested in late summer and kept in cool cellars.</p>" * 5 + \
        "</article></body></html>"
    app = KtuiApp(settings)
    with serve(lambda req: Response(404)) as server:
        sitemap = (f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                   f"<url><loc>{server.url}/a</loc></url><url><loc>{server.url}/b</loc></url></urlset>")
        server.handler = routes({
            "/pears": Response(200, page, {"Content-Type": "text/html"}),
            "/a": Response(200, page.replace("Pears", "Plums"), {"Content-Type": "text/html"}),
            "/b": Response(200, page.replace("Pears", "Quinces"), {"Content-Type": "text/html"}),
            "/sitemap.xml": Response(200, sitemap, {"Content-Type": "application/xml"}),
        })
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            await with_base(app, pilot)
            # note, typed into the editor
            app.last_add_tab = "note"  # reopens on that tab
            await pilot.press("a")
            await pilot.pause()
            app.screen.query_one("#note-text", TextArea).focus()
            await pilot.press(*"Figs dry well in the sun")
            await pilot.press("ctrl+s")
            await until(lambda: not isinstance(app.screen, AddItemsScreen), pilot, what="note added")
            # url
            app.last_add_tab = "url"  # reopens on that tab
            await pilot.press("a")
            app.screen.query_one("#url-input", Input).value = f"{server.url}/pears"
            await pilot.press("ctrl+s")
            await until(lambda: not isinstance(app.screen, AddItemsScreen), pilot, what="url added")
            # sitemap
            app.last_add_tab = "sitemap"  # reopens on that tab
            await pilot.press("a")
            app.screen.query_one("#sitemap-input", Input).value = f"{server.url}/sitemap.xml"
            await pilot.press("ctrl+s")
            await until(lambda: not isinstance(app.screen, AddItemsScreen), pilot, what="sitemap added")
            assert await app.ks.wait_idle(timeout=20)
            await all_done(app, pilot, 3)
            got = labels(app).values()
            assert any("✔ Figs dry well" in t for t in got)
            assert any(t.startswith("🌐 ✔") and "/pears" in t for t in got)
            assert any(t.startswith("🧭 ✔") and "sitemap.xml" in t for t in got)
            resp = await app.ks.search(app.item_tree.base_id, "quinces")
            assert resp.results and "Quinces" in resp.results[0].page_content


async def test_a_bad_url_is_refused_in_the_dialog_and_nothing_crashes(settings):
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await with_base(app, pilot)
        app.last_add_tab = "url"  # reopens on that tab
        await pilot.press("a")
        app.screen.query_one("#url-input", Input).value = "not a url"
        await pilot.press("ctrl+s")
        screen = app.screen
        await until(lambda: "url" in str(screen.query_one(".dialog-error").render()).lower(), pilot, what="error")
        assert isinstance(app.screen, AddItemsScreen)
        await pilot.press("escape")
        assert not app.item_tree.nodes_by_id


async def test_search_opens_the_chunk_in_context_and_marks_degraded(settings, docs, embedding_server):
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        await app.ks.add_items(base.id, [ItemInput("directory", {"path": str(docs)})])
        assert await app.ks.wait_idle(timeout=15)
        await pilot.press("slash")
        assert app.focused is app.query_one("#query")
        await pilot.press(*"bananas", "enter")
        await until(lambda: app.search_pane.results, pilot, what="results")
        assert app.search_pane.results[0].metadata["source"].endswith("beta.md")
        status = str(app.query_one("#search-status").render())
        assert "bananas" in status and "keyword results only" not in status
        app.query_one("#results").focus()
        await pilot.press("enter")
        assert isinstance(app.screen, ChunkContextScreen)
        await until(lambda: app.screen.query("#context") and
                    "Bananas ripen" in str(app.screen.query_one("#context").render()), pilot, what="context")
        await pilot.press("escape")
        # mode selector: bm25 from the keyboard
        await pilot.press("ctrl+o", "ctrl+o")
        assert app.search_pane.mode == "bm25"
        # a query that cannot be embedded falls back to keywords, clearly marked
        await pilot.press("ctrl+o")
        embedding_server.faults.fail(500, times=3)
        app.query_one("#query", Input).value = "cherries"
        app.query_one("#query", Input).focus()
        await pilot.press("enter")
        await until(lambda: "keyword results only" in str(app.query_one("#search-status").render()), pilot, what="degraded")
        assert app.search_pane.results and "gamma" in app.search_pane.results[0].metadata["source"]


async def test_delete_and_reindex_an_item(settings, docs):
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        items = await app.ks.add_items(base.id, [ItemInput("file", {"path": str(docs / n)})
                                                 for n in ("alpha.md", "beta.md")])
        await all_done(app, pilot, 2)
        app.item_tree.focus()
        target = app.item_tree.nodes_by_id[items[0].id]
        app.item_tree.move_cursor(target)
        await pilot.pause()
        # reindex: the item is read and embedded again (new chunk rows) and ends completed
        before = {c.id for c in await app.ks.list_item_chunks(base.id, items[0].id)}
        await pilot.press("r")

        async def rechunked() -> bool:
            now = {c.id for c in await app.ks.list_item_chunks(base.id, items[0].id)}
            return bool(now) and not (now & before)

        for _ in range(300):
            if await rechunked() and target.data.status == ItemStatus.COMPLETED:
                break
            await pilot.pause(0.02)
        assert await rechunked() and target.data.status == ItemStatus.COMPLETED
        # delete, after confirming
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(lambda: items[0].id not in app.item_tree.nodes_by_id, pilot, what="removed")
        remaining = await app.ks.list_items(base.id)
        assert [i.id for i in remaining.items] == [items[1].id]


async def test_chunk_browser_deletes_a_chunk(settings, tmp_path):
    long = tmp_path / "long.md"
    long.write_text("\n\n".join(f"## Part {i}\n\n" + f"Paragraph {i} about oranges and lemons. " * 12
                                for i in range(4)), encoding="utf-8")
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        (item,) = await app.ks.add_items(base.id, [ItemInput("file", {"path": str(long)})])
        await all_done(app, pilot, 1)
        before = await app.ks.list_item_chunks(base.id, item.id)
        assert len(before) > 2
        app.item_tree.focus()
        await pilot.press("c")
        assert isinstance(app.screen, ChunkBrowserScreen)
        browser = app.screen
        await until(lambda: len(browser.chunks) == len(before), pilot, what="chunks listed")
        await pilot.press("j")
        doomed = browser.chunks[1].id
        await pilot.press("d")
        await until(lambda: isinstance(app.screen, ConfirmScreen), pilot, what="asks first")
        await pilot.press("y")
        await until(lambda: len(browser.chunks) == len(before) - 1, pilot, what="chunk deleted")
        after = await app.ks.list_item_chunks(base.id, item.id)
        assert doomed not in {c.id for c in after} and len(after) == len(before) - 1
        await pilot.press("escape")
        assert not isinstance(app.screen, ChunkBrowserScreen)


async def test_restore_a_failed_base_and_delete_a_base(settings):
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        doc = {"format": EXPORT_FORMAT, "version": 1, "bases": [{
            "name": "Archive", "embedding_model_id": "gone::model", "dimensions": 8,
            "items": [{"type": "note", "data": {"content": "Old notes about walnuts"}}]}]}
        await app.ks.import_bases(doc)
        app.reload_bases()
        await until(lambda: app.bases_pane.current_base is not None, pilot, what="failed base listed")
        failed = app.bases_pane.current_base
        assert failed.status == BaseStatus.FAILED
        assert "restores" in str(app.bases_pane.get_option(failed.id).prompt)
        assert app.check_action("add_items", ()) is False  # nothing but restore/delete on a failed base
        await pilot.press("e")  # its settings can still be edited (model fields locked)
        assert isinstance(app.screen, BaseFormScreen) and app.screen.query_one("#model").disabled
        await pilot.press("escape")
        await pilot.press("R")
        assert isinstance(app.screen, RestoreScreen)
        screen = app.screen
        await until(lambda: screen.query_one("#dimensions", Input).value == "32", pilot, what="dims detected")
        await pilot.press("ctrl+s")
        await until(lambda: not isinstance(app.screen, RestoreScreen), pilot, what="restored")
        assert await app.ks.wait_idle(timeout=15)
        await until(lambda: app.bases_pane.current_base and app.bases_pane.current_base.id != failed.id, pilot,
                    what="new base selected")
        new = app.bases_pane.current_base
        assert new.is_usable and new.embedding_model_id == MODEL
        await all_done(app, pilot, 1)
        assert (await app.ks.search(new.id, "walnuts")).results
        # delete the old failed base
        app.bases_pane.highlighted = app.bases_pane.get_option_index(failed.id)
        await pilot.press("D")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(lambda: failed.id not in app.bases_pane.bases, pilot, what="base deleted")
        assert [b.id for b in (await app.ks.list_bases()).items] == [new.id]


async def test_failed_item_and_service_errors_are_shown_not_fatal(settings, tmp_path):
    (tmp_path / "blob.dat").write_bytes(bytes(range(256)) * 4)
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        (item,) = await app.ks.add_items(base.id, [ItemInput("file", {"path": str(tmp_path / "blob.dat")})])
        await all_done(app, pilot, 1)
        assert "✘ blob.dat  Unsupported file type: blob.dat" in labels(app)[item.id]
        # a call the service refuses: the item was deleted behind the app's back
        await app.ks.delete_items(base.id, [item.id])
        app.call_service("Reindex", app.ks.reindex_items(base.id, [item.id]), item_id=item.id)
        await until(lambda: app._notifications, pilot, what="toast")
        assert app.is_running
        assert any(n.severity == "error" for n in app._notifications)


async def test_similar_items_dialog(settings, docs):
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        items = await app.ks.add_items(base.id, [ItemInput("file", {"path": str(p)})
                                                 for p in sorted(docs.rglob("*.md"))])
        await all_done(app, pilot, len(items))
        app.item_tree.focus()
        await pilot.press("s")
        assert isinstance(app.screen, SimilarScreen)
        listing = app.screen.query_one("#similar-list")
        await until(lambda: listing.option_count == len(items) - 1, pilot, what="similar items")
        status = str(app.screen.query_one("#similar-status").render())
        assert "keyword results only" not in status and "2 similar items" in status


async def test_keymap_help_palette_and_focus(tmp_path, embedding_server):
    from ktui.tui.commands import KtuiCommands
    from tests.tui.conftest import make_settings

    settings = make_settings(tmp_path / "data", embedding_server, keymap={"base.new": "ctrl+n"}, theme="nord")
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        assert app.theme == "nord"
        await pilot.press("n")  # remapped away
        assert not isinstance(app.screen, BaseFormScreen)
        await pilot.press("ctrl+n")
        assert isinstance(app.screen, BaseFormScreen)
        await pilot.press("a", "n")  # the app's keys do not stack dialogs on a dialog
        assert len(app.screen_stack) == 2
        await pilot.press("escape")
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("#keys")
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert ["Ctrl+N", "Create a knowledge base", "base.new"] in [list(map(str, r)) for r in rows]
        await pilot.press("escape")
        # the palette offers only what makes sense now: no base yet, so no "Add"
        names = [a.description for a, _ in KtuiCommands(app.screen)._available()]
        assert "New" in names and "Add" not in names and "Similar" not in names
        await with_base(app, pilot)
        names = [a.description for a, _ in KtuiCommands(app.screen)._available()]
        assert "Add" in names
        # run an action from the palette
        app.bases_pane.focus()
        await pilot.press("ctrl+p")
        await until(lambda: app.screen.query("CommandInput") and app.screen.query_one("CommandInput").has_focus,
                    pilot, what="palette open")
        await pilot.press(*"add")

        def top_hit() -> str:
            cl = app.screen.query("CommandList")
            if not cl or not cl.first().option_count:
                return ""
            return str(cl.first().get_option_at_index(0).prompt)

        await until(lambda: top_hit().startswith("Add"), pilot, what="palette offers Add")
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, AddItemsScreen), pilot, what="add dialog from the palette")
        await pilot.press("escape")
        # Tab moves between panes
        app.bases_pane.focus()
        await pilot.press("tab")
        assert app.focused is app.item_tree
        await pilot.press("tab")
        assert app.focused is app.query_one("#query")


async def test_events_are_applied_in_batches(settings, tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(60):
        (folder / f"f{i:02}.md").write_text(f"# File {i}\n\nWords number {i} about apricots.\n", encoding="utf-8")
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        loop_time = __import__("time").monotonic
        start_batches, t0 = app.batches_applied, loop_time()
        await app.ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await app.ks.wait_idle(timeout=20)
        await pilot.pause(0.3)
        elapsed = loop_time() - t0
        batches = app.batches_applied - start_batches
        # 60 leaves x several state changes each, but at most ~15 updates a second
        assert 1 <= batches <= 15 * elapsed + 2
        assert app.query_one("#queue-figures").render().plain.count("done") == 1
        assert app.query_one("StatusLine").stats.done >= 60


def test_node_label_shows_progress_and_errors():
    from ktui.core.models import FileItemData, ItemPhase, ItemType, KnowledgeItem
    from ktui.tui.widgets.item_tree import ItemNode

    item = KnowledgeItem("i", "b", None, ItemType.FILE, FileItemData("/x/a.md", "/x/a.md"),
                         ItemStatus.PROCESSING, ItemPhase.EMBEDDING, None, "t", "t")
    node = ItemNode.of(item)
    node.progress = 0.42
    assert node_label(node).plain == "📄 ◌ a.md  embedding  42%"
    node.status, node.phase, node.error = ItemStatus.FAILED, None, "Cannot read /x/a.md"
    assert node_label(node).plain == "📄 ✘ a.md  Cannot read a.md"


async def test_demo_builds_the_demo_base_live_and_reuses_it(tmp_path):
    from ktui.core.config import Settings
    from ktui.tui.demo_base import DEMO_BASE_NAME, demo_corpus_dir

    settings = Settings(data_dir=tmp_path / "data", auto_ollama=False)  # the built-in model only
    corpus = sorted(p.name for p in demo_corpus_dir().rglob("*") if p.is_file())
    assert len(corpus) >= 10
    app = KtuiApp(settings, demo=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and app.item_tree.nodes_by_id, pilot, 30, what="demo base")
        base = app.bases_pane.current_base
        assert base.name == DEMO_BASE_NAME and base.embedding_model_id == "builtin::wordllama"
        assert await app.ks.wait_idle(timeout=60)
        leaves = [i for i in (await app.ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).items
                  if i.type.is_leaf]
        assert sorted(i.display_name for i in leaves) == corpus
        assert all(i.status == ItemStatus.COMPLETED for i in leaves)
        resp = await app.ks.search(base.id, "customer returns a broken spar")
        assert "returns.md" in resp.results[0].metadata["source"] or "repairs.md" in resp.results[0].metadata["source"]
    again = KtuiApp(settings, demo=True)
    async with again.run_test(size=SIZE) as pilot:
        await until(lambda: again.ready and again.bases_pane.current_base is not None, pilot, 30, what="reuse")
        assert [b.id for b in again.bases_pane.bases.values()] == [base.id]


async def test_live_additions_keep_the_cursor_and_the_viewport(settings):
    app = KtuiApp(settings)
    async with app.run_test(size=(120, 20)) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot)
        await app.ks.add_items(base.id, [ItemInput("note", {"content": f"Note number {i} about figs"})
                                         for i in range(40)])
        await until(lambda: len(app.item_tree.nodes_by_id) == 40, pilot, what="40 notes")
        tree = app.item_tree
        tree.focus()
        tree.move_cursor(tree.root.children[25])
        tree.scroll_to(y=15, animate=False, immediate=True)
        await pilot.pause()
        cursor_item = tree.cursor_node.data.item.id
        top_item = tree.get_node_at_line(int(tree.scroll_y)).data.item.id
        assert tree.scroll_y > 0
        # new roots arrive (newest first, i.e. above everything the user looks at)
        await app.ks.add_items(base.id, [ItemInput("note", {"content": f"Late note {i}"}) for i in range(5)])
        await until(lambda: len(tree.nodes_by_id) == 45, pilot, what="5 more notes")
        await app.ks.wait_idle(timeout=10)
        await pilot.pause(0.2)
        assert tree.cursor_node.data.item.id == cursor_item
        assert tree.get_node_at_line(int(tree.scroll_y)).data.item.id == top_item
        assert tree.root.children[0].data.item.display_name.startswith("Late note")


async def test_search_every_base_or_named_ones_with_filters_from_the_query_box(settings, docs):
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        fruit = await with_base(app, pilot, "Fruit")
        await app.ks.add_items(fruit.id, [ItemInput("directory", {"path": str(docs)})])
        other = await app.ks.create_base("Orchard [notes]", MODEL, None)
        await app.ks.add_items(other.id, [ItemInput("note", {"content": "Bananas ripen in the orchard shed"})])
        assert await app.ks.wait_idle(timeout=30)
        query = app.query_one("#query", Input)

        async def search(text: str) -> str:
            app.search_pane.clear_results()
            query.value = text
            query.focus()
            await pilot.press("enter")
            await until(lambda: "result" in str(app.query_one("#search-status").render())
                        or "No results" in str(app.query_one("#search-status").render())
                        or app.search_pane.results, pilot, what=f"search {text!r}")
            await until(lambda: "Searching" not in str(app.query_one("#search-status").render()), pilot,
                        what="search finished")
            return str(app.query_one("#search-status").render())

        # the selected base only
        await search("bananas")
        assert {r.base_id for r in app.search_pane.results} <= {fruit.id, None}
        # every base: results of both, each naming its base (literally, brackets and all)
        status = await search("bananas in:all")
        assert "in all bases" in status
        assert {fruit.id, other.id} <= {r.base_id for r in app.search_pane.results}
        shown = [str(o.prompt) for o in app.query_one("#results").options]
        assert any("[Orchard [notes]]" in p for p in shown) and any("[Fruit]" in p for p in shown)
        # a named base, and a filter: only notes
        await search('bananas in:"Orchard [notes]" type:note')
        assert app.search_pane.results and {r.base_id for r in app.search_pane.results} == {other.id}
        # a filter that excludes everything says so plainly
        status = await search("bananas in:all after:2999-01-01")
        assert "No results" in status and "after 2999-01-01" in status
        # a word that cannot be used is named, nothing crashes
        app.search_pane.clear_results()
        query.value = "bananas type:video"
        await pilot.press("enter")
        await until(lambda: "type:video is not one of" in str(app.query_one("#search-status").render()), pilot,
                    what="bad filter named")
        # opening a result of another base opens it in that base
        await search("orchard shed in:all")
        first = app.search_pane.results[0]
        assert first.base_id == other.id
        app.query_one("#results").focus()
        await pilot.press("enter")
        assert isinstance(app.screen, ChunkContextScreen)
        await until(lambda: app.screen.query("#context") and
                    "orchard shed" in str(app.screen.query_one("#context").render()), pilot, what="context")
        assert app.is_running

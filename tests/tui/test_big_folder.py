"""A big folder in the item tree: every page loads, j/k walk its children, details follow.

The folder (a few hundred files, more than two pages) is built through the facade in one
call: `import_bases` with an `index` restores the items as they were, completed, with
nothing to read or embed (tests/benchmarks/test_bench_tui_tree.py builds 20,000 the same
way). Pages are fetched one at a time, each only once the previous one is in the tree, so
this also checks that the loading goes on to the last page.
"""

from __future__ import annotations

import gc

from ktui.core.service import KnowledgeService
from ktui.tui.app import KtuiApp
from ktui.tui.screens.item_detail import ItemDetailScreen
from ktui.tui.widgets.item_tree import PAGE_SIZE
from tests.benchmarks.test_bench_tui_tree import folder_document
from tests.tui.conftest import until
from tests.tui.test_flows import SIZE

N = 2 * PAGE_SIZE + 37


async def test_j_k_walk_a_big_folder_and_the_details_follow_the_cursor(settings):
    async with await KnowledgeService.open(settings=settings) as ks:
        await ks.import_bases(folder_document(N))
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and bool(app.item_tree.nodes_by_id), pilot, 30, "the folder listed")
        tree = app.item_tree
        (folder,) = tree.root.children
        tree.focus()
        tree.move_cursor(folder)
        await pilot.press("l")  # expand
        await until(lambda: len(folder.children) == N, pilot, 60, "every page of children")
        names = [c.data.item.display_name for c in folder.children]
        assert names == sorted(names) and len(set(names)) == N  # by name, each once
        # pages came in display order (oldest first, as the walk created them): each landed
        # below the rows already shown, so none moved under the cursor (nodes are numbered
        # as they are added)
        assert [c.id for c in folder.children] == sorted(c.id for c in folder.children)
        # the loader froze what existed between pages (item_tree._fetch_pages) and thawed it
        await until(lambda: gc.get_freeze_count() == 0, pilot, 10, "nothing left frozen after the load")

        middle = N // 2
        tree.move_cursor(folder.children[middle])
        await pilot.pause()
        for key, expected in (("j", middle + 1), ("j", middle + 2), ("k", middle + 1), ("k", middle),
                              ("k", middle - 1)):
            await pilot.press(key)
            await until(lambda e=expected: tree.cursor_node is folder.children[e], pilot, 10, f"cursor on {expected}")
            assert tree.current_item == folder.children[expected].data.item
            assert app.check_action("item_info", ()) is True

        # the details open on the item under the cursor, then on the next one after j
        for key in ("i", "escape", "j", "i"):
            await pilot.press(key)
            await pilot.pause()
        await until(lambda: isinstance(app.screen, ItemDetailScreen), pilot, 10, "details open")
        assert app.screen.item.id == folder.children[middle].data.item.id
        assert app.screen.item.display_name == names[middle]
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, ItemDetailScreen), pilot, 10, "details closed")

        # deleting the folder forgets every child it held
        await app.ks.delete_items(tree.base_id, [folder.data.item.id])
        await until(lambda: not tree.nodes_by_id, pilot, 30, "folder and children gone from the tree")
        assert not tree.root.children

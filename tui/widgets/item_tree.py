"""The item tree: roots of the selected base and, under containers, their children.

Loading is lazy and chunked (harlequin's model): roots load when a base is
selected and children when a container is first expanded, one page of 100 at
a time, each page posted as its own message so a 2,000-file folder grows in
visible steps instead of freezing the UI. Live state arrives from the app in
batches (`apply_changes`): labels change in place, so neither the cursor nor
the scroll position moves.
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass, replace
from typing import ClassVar

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ktui.core.errors import KnowledgeError
from ktui.core.models import ItemChanged, ItemStatus, KnowledgeItem
from ktui.core.service import KnowledgeService
from ktui.tui.host import host_of
from ktui.tui.keymap import widget_bindings
from ktui.tui.messages import ItemsFetched, ItemsPage, ServiceFailed
from ktui.tui.widgets.item_labels import ItemNode, node_label, sort_key

PAGE_SIZE = 100


@dataclass
class ItemOpened(Message):
    """Enter on a leaf (or `i` on any item): the app shows the item's details."""

    item: KnowledgeItem


class ItemTree(Tree[ItemNode]):
    """Items of one base. `base_id` is None until a base is selected."""

    BINDINGS: ClassVar[list[Binding]] = widget_bindings(
        ["tree.open", "list.down", "list.up", "list.top", "list.bottom", "tree.collapse", "tree.expand"])

    def __init__(self, **kw) -> None:
        super().__init__("items", **kw)
        self.show_root = False
        self.auto_expand = False
        self.guide_depth = 3
        self.base_id: str | None = None
        self.generation = 0
        self.nodes_by_id: dict[str, TreeNode[ItemNode]] = {}
        self._fetching: set[str | None] = set()

    @property
    def ks(self) -> KnowledgeService:
        return host_of(self).ks

    def get_label_width(self, node: TreeNode[ItemNode]) -> int:
        """0: the pane never scrolls sideways (overflow-x hidden; a long label is cut at its
        edge), so the tree's virtual width is never needed.

        Textual's `Tree` rebuilds its line list after every insertion and measures every
        label in it to size a horizontal scroll (`render_label` per line, ~85 % of the
        rebuild). With a 20,000-file folder loading a page of 100 at a time that was ~300 ms
        per page, and every j/k pressed meanwhile waited behind it (p50 249 ms, p95 581 ms;
        QA saw 140–680 ms). Without the measuring a rebuild only walks the nodes."""
        return 0

    # --- keys: Enter opens, g/G ends, h/l collapse/expand ----------------------

    def action_open(self) -> None:
        """Enter: a folder or sitemap expands/collapses, any other item opens its details."""
        node = self.cursor_node
        if node is None or node.data is None:
            return
        if node.data.item.type.is_container:
            node.toggle()
        else:
            self.post_message(ItemOpened(node.data.item))

    def action_first(self) -> None:
        if self.last_line >= 0:
            self.cursor_line = 0

    def action_last(self) -> None:
        if self.last_line >= 0:
            self.cursor_line = self.last_line

    def action_collapse(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    def action_expand(self) -> None:
        node = self.cursor_node
        if node is not None and node.allow_expand and not node.is_expanded:
            node.expand()

    # --- loading ----------------------------------------------------------

    def load_base(self, base_id: str | None) -> None:
        """Show the items of `base_id` (None: empty), discarding pages in flight."""
        self.generation += 1
        self.base_id = base_id
        self.nodes_by_id.clear()
        self.clear()
        if base_id is not None:
            self._load_children(None)

    def reload(self) -> None:
        cursor = self.cursor_node.data.item.id if self.cursor_node and self.cursor_node.data else None
        self.load_base(self.base_id)
        self._restore_cursor = cursor

    _restore_cursor: str | None = None

    def _load_children(self, parent_id: str | None) -> None:
        base_id, generation = self.base_id, self.generation
        assert base_id is not None
        self.run_worker(self._fetch_pages(base_id, parent_id, generation), group=f"tree-{parent_id}",
                        exclusive=True, exit_on_error=False)

    async def _fetch_pages(self, base_id: str, parent_id: str | None, generation: int) -> None:
        """The children of `parent_id` a page at a time, newest first, by cursor
        (`list_items_after`): a folder of 20,000 files costs the same per page at its end
        as at its start (pages by number counted and skipped every earlier child).

        Between pages the objects that exist are frozen out of the cyclic garbage
        collector (`gc.freeze`), and thawed when the last page is in (or the load is
        cancelled): while a big folder loads, every full collection walked every tree
        node and label so far, 60–230 ms each, dozens of them. Frozen, the 20,000-file
        folder loads in ~5 s instead of ~12 s and a j/k meanwhile waits p95 ~96 ms instead
        of ~250 ms (tests/benchmarks/test_bench_tui_tree.py). Freezing only defers
        collecting cycles made before it; reference counting frees everything else. The
        thaw also thaws what start-up froze (`cli.startup_over`: gc has no partial thaw),
        so the rare full collections after a big load walk those objects again; frozen
        for good instead, a reloaded folder's nodes could never be collected."""
        cursor: str | None = None
        try:
            while True:
                try:
                    # a folder's children oldest first: the walk created them in name order, which
                    # is (nearly) the order they are shown in, so each page lands below the last
                    # instead of pushing the rows the user is on down (roots: newest first)
                    result = await self.ks.list_items_after(base_id, group_id=parent_id, cursor=cursor,
                                                            limit=PAGE_SIZE, newest_first=parent_id is None)
                except KnowledgeError as exc:
                    self.post_message(ServiceFailed("Loading items failed", str(exc), base_id=base_id))
                    return
                applied = asyncio.Event()
                self.post_message(ItemsPage(base_id, parent_id, result.items, generation, replace=cursor is None,
                                            applied=applied))
                if result.next_cursor is None:
                    return
                cursor = result.next_cursor
                # One page in flight: the next is fetched once this one is in the tree. Posting
                # pages as fast as the catalogue reads them queued dozens ahead of the user's keys
                # (each costing a rebuild of the tree's lines), and j/k waited behind all of them.
                await applied.wait()
                gc.freeze()
        finally:
            gc.unfreeze()

    def on_items_page(self, message: ItemsPage) -> None:
        message.stop()
        if message.applied is not None:
            message.applied.set()  # whether applied or dropped: the fetcher may go on
        if message.generation != self.generation or message.base_id != self.base_id:
            return
        if message.parent_id is None:
            parent = self.root
        else:
            parent = self.nodes_by_id.get(message.parent_id)
            if parent is None:
                return
        self._add_items(parent, message.items, at_top=False)
        if self._restore_cursor and self._restore_cursor in self.nodes_by_id:
            self.move_cursor(self.nodes_by_id[self._restore_cursor])
            self._restore_cursor = None
        elif self.cursor_line < 0 and self.root.children:
            self.cursor_line = 0

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[ItemNode]) -> None:
        data = event.node.data
        if data is not None and data.item.type.is_container and not data.loaded:
            data.loaded = True
            self._load_children(data.item.id)

    def _add_items(self, parent: TreeNode[ItemNode], items: list[KnowledgeItem], *, at_top: bool) -> None:
        anchor = self._first_visible()
        added = 0
        for item in items:
            if item.id in self.nodes_by_id:
                continue
            data = ItemNode.of(item)
            kw: dict = {}
            if parent is not self.root:
                kw = self._sorted_position(parent, item)
            elif at_top and parent.children:
                kw = {"before": 0}
            node = parent.add(node_label(data), data, allow_expand=item.type.is_container, **kw)
            self.nodes_by_id[item.id] = node
            added += 1
        if added and (at_top or parent is not self.root):
            self._keep_viewport(anchor)

    @staticmethod
    def _sorted_position(parent: TreeNode[ItemNode], item: KnowledgeItem) -> dict:
        key = sort_key(item)
        children = parent.children
        lo, hi = 0, len(children)
        while lo < hi:
            mid = (lo + hi) // 2
            data = children[mid].data
            if data is not None and sort_key(data.item) < key:
                lo = mid + 1
            else:
                hi = mid
        return {"before": lo} if lo < len(children) else {}

    def _first_visible(self) -> TreeNode[ItemNode] | None:
        return self.get_node_at_line(int(self.scroll_y)) if self.scroll_y > 0 else None

    def _keep_viewport(self, anchor: TreeNode[ItemNode] | None) -> None:
        """Lines inserted above the viewport must not scroll what the user is reading."""
        if anchor is None:
            return
        _ = self.last_line  # public Tree API; rebuilds the line cache now so `anchor.line` is current
        self.scroll_to(y=anchor.line, animate=False, immediate=True)

    # --- live updates (called by the app with one coalesced batch) ---------

    def apply_changes(self, changes: dict[str, ItemChanged]) -> None:
        for item_id, ev in changes.items():
            node = self.nodes_by_id.get(item_id)
            if node is None or node.data is None:
                continue
            data = node.data
            data.status, data.phase, data.error = ev.status, ev.phase, ev.error
            # the item itself too: `current_item` (what actions and dialogs get) is the live state,
            # not the row as it was when the node was first fetched
            data.item = replace(data.item, status=ev.status, phase=ev.phase, error=ev.error)
            data.notice = None
            data.progress = ev.progress if ev.status == ItemStatus.PROCESSING else None
            data.ocr_pages = ev.ocr_pages if ev.status == ItemStatus.PROCESSING else None
            node.set_label(node_label(data))

    def remove_items(self, item_ids: tuple[str, ...] | list[str]) -> None:
        for item_id in item_ids:
            node = self.nodes_by_id.pop(item_id, None)
            if node is None:
                continue
            self._forget_descendants(node)
            node.remove()

    def _forget_descendants(self, node: TreeNode[ItemNode]) -> None:
        """Drop the nodes under `node` from `nodes_by_id`, walking its subtree: O(subtree),
        where scanning every loaded node for its ancestors cost O(n) per removed item (a
        file removed from a loaded 20,000-file folder scanned all 20,000)."""
        stack = list(node.children)
        while stack:
            child = stack.pop()
            if child.data is not None:
                self.nodes_by_id.pop(child.data.item.id, None)
            stack.extend(child.children)

    def items_added(self, parent_id: str | None, item_ids: tuple[str, ...]) -> None:
        """New rows exist: fetch them if their parent is on screen."""
        if parent_id is not None:
            parent = self.nodes_by_id.get(parent_id)
            if parent is None or parent.data is None or not parent.data.loaded:
                return
        ids = [i for i in item_ids if i not in self.nodes_by_id]
        if not ids or self.base_id is None:
            return
        if len(ids) > PAGE_SIZE:
            # a big expansion: reload that level page by page instead of N lookups
            if parent_id is None:
                self.reload()
            else:
                parent = self.nodes_by_id[parent_id]
                self._forget_descendants(parent)
                parent.remove_children()
                self._load_children(parent_id)
            return
        self.run_worker(self._fetch_ids(self.base_id, ids, self.generation), exit_on_error=False)

    async def _fetch_ids(self, base_id: str, ids: list[str], generation: int) -> None:
        items = []
        for item_id in ids:
            try:
                items.append(await self.ks.get_item(item_id))
            except KnowledgeError:
                continue  # deleted meanwhile
        self.post_message(ItemsFetched(base_id, items, generation))

    def on_items_fetched(self, message: ItemsFetched) -> None:
        message.stop()
        if message.generation != self.generation or message.base_id != self.base_id:
            return
        # one `_add_items` per parent: each keeps the viewport, which rebuilds the tree's lines
        by_parent: dict[str | None, list[KnowledgeItem]] = {}
        for item in message.items:
            by_parent.setdefault(item.group_id, []).append(item)
        for group_id, items in by_parent.items():
            parent = self.root if group_id is None else self.nodes_by_id.get(group_id)
            if parent is not None:
                self._add_items(parent, items, at_top=True)
        if self.cursor_line < 0 and self.root.children:
            self.cursor_line = 0

    def set_item_error(self, item_id: str, error: str) -> None:
        node = self.nodes_by_id.get(item_id)
        if node is not None and node.data is not None:
            node.data.notice = error
            node.set_label(node_label(node.data))

    def set_watch(self, item_id: str, watch: bool) -> None:
        node = self.nodes_by_id.get(item_id)
        if node is not None and node.data is not None:
            node.data.watch = watch
            node.set_label(node_label(node.data))

    @property
    def current_item(self) -> KnowledgeItem | None:
        node = self.cursor_node
        return node.data.item if node is not None and node.data is not None else None


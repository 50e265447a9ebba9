"""The app's actions on bases and items (the keys of tui.keymap): each opens a dialog or
calls the service in a worker (`KtuiApp.call_service`), whose outcome arrives as a message.

`BaseAndItemActions` is a mixin of `KtuiApp` (tui/app.py), which owns the panes, the
service and the message handlers these actions lead to.
"""

from __future__ import annotations

from ktui.core.models import KnowledgeBase
from ktui.tui.base_rebuild import reindex_whole_base
from ktui.tui.messages import BaseDeleted, BaseReindexed, ReindexQueued, WatchSet
from ktui.tui.screens.add_items import AddItemsScreen
from ktui.tui.screens.base_form import BaseFormScreen
from ktui.tui.screens.chunks import ChunkBrowserScreen
from ktui.tui.screens.common import Dialog
from ktui.tui.screens.confirm import ConfirmScreen
from ktui.tui.screens.item_detail import ItemDetailScreen
from ktui.tui.screens.restore import RestoreScreen
from ktui.tui.screens.similar import SimilarScreen
from ktui.tui.widgets.item_tree import ItemOpened


class BaseAndItemActions:
    """`action_*` for bases (new, edit, delete, reindex, restore) and items (add, delete,
    reindex, watch, details, chunks, similar)."""

    # --- bases ---------------------------------------------------------------------

    def action_new_base(self) -> None:
        self.push_screen(BaseFormScreen(default_model=self.settings.default_embedding_model), self._base_saved)

    def action_edit_base(self) -> None:
        base = self.current_base
        if base is None:
            return
        group = self.groups.get(base.group_id, "") if base.group_id else ""
        self.push_screen(BaseFormScreen(base, group_name=group), self._base_saved)

    def _base_saved(self, base: KnowledgeBase | None) -> None:
        if base is not None:
            self.notify(f"Saved base “{base.name}”", timeout=3)
            if base.id in self.bases_pane.bases and base.id == self.item_tree.base_id:
                self.search_pane.set_defaults(base.search_mode.value, base.top_k)
            self._select_base(base)

    def action_delete_base(self) -> None:
        base = self.current_base
        if base is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.call_service(f"Deleting “{base.name}”", self.ks.delete_base(base.id), BaseDeleted,
                                  base_id=base.id, name=base.name)

        self.push_screen(ConfirmScreen("Delete base", f"Delete “{base.name}” with all its items and vectors?"),
                         confirmed)

    def action_reindex_base(self) -> None:
        base = self.current_base
        if base is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.call_service(f"Reindexing “{base.name}”", reindex_whole_base(self.ks, base), BaseReindexed,
                                  base_id=base.id, name=base.name)

        why = ("Its store needs a rebuild. " if base.needs_rebuild else "")
        self.push_screen(ConfirmScreen("Reindex all", f"{why}Read and embed every item of “{base.name}” again?",
                                       confirm_label="Reindex"), confirmed)

    def action_restore_base(self) -> None:
        base = self.current_base
        if base is None:
            return

        def restored(new: KnowledgeBase | None) -> None:
            if new is not None:
                self.notify(f"Restored as “{new.name}” with {new.embedding_model_id}", timeout=4)
                self._select_base(new)

        self.push_screen(RestoreScreen(base, self.settings.default_embedding_model), restored)

    # --- items -----------------------------------------------------------------------

    def action_add_items(self) -> None:
        base = self.current_base
        if base is None:
            return

        screen = AddItemsScreen(base.id, base.name, self.start_dir, initial_tab=self.last_add_tab)

        def added(items: list | None) -> None:
            self.last_add_tab = screen.active_tab
            if items:
                self.notify(f"Added {len(items)} item(s); indexing…", timeout=3)

        self.push_screen(screen, added)

    def action_delete_item(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is None or item is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.call_service("Delete", self.ks.delete_items(base.id, [item.id]), item_id=item.id)

        self.push_screen(ConfirmScreen("Delete item", f"Delete “{item.display_name}” and its chunks?"), confirmed)

    def action_reindex_item(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is None or item is None:
            return
        self.call_service("Reindex", self.ks.reindex_items(base.id, [item.id]), ReindexQueued, item_id=item.id,
                          name=item.display_name)

    def action_toggle_watch(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is None or item is None:
            return
        node = self.item_tree.nodes_by_id.get(item.id)
        watch = not (node.data.watch if node is not None and node.data is not None else False)
        self.call_service("Watch", self.ks.set_watch(base.id, item.id, watch), WatchSet, item_id=item.id,
                          folder_id=item.id, name=item.display_name, watch=watch)

    def action_item_info(self) -> None:
        item = self.item_tree.current_item
        if item is not None:
            self.push_screen(ItemDetailScreen(item))

    def on_item_opened(self, message: ItemOpened) -> None:
        if not isinstance(self.screen, Dialog):
            self.push_screen(ItemDetailScreen(message.item))

    def action_chunks(self) -> None:
        item = self.item_tree.current_item
        if item is not None:
            self.push_screen(ChunkBrowserScreen(item))

    def action_similar(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is not None and item is not None:
            self.push_screen(SimilarScreen(base, item))

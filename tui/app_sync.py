"""Keeping the panes in step with the service: the event pump and the list of bases.

* One worker reads `ks.subscribe()`: it takes whatever the subscription has coalesced
  (latest state per item wins), posts it as ONE `ServiceEvents` message and sleeps
  1/15 s; `on_service_events` applies a batch in a single `batch_update()`.
* Bases, groups and counts are fetched in a worker, at most one fetch in flight and
  one queued; the highlighted base decides what the item tree and search pane show.

`PaneSync` is a mixin of `KtuiApp` (tui/app.py).
"""

from __future__ import annotations

import asyncio

from textual.widgets import Label

from ktui.core.errors import KnowledgeError
from ktui.core.models import (
    BaseChanged,
    BaseRemoved,
    ItemChanged,
    ItemsAdded,
    ItemsRemoved,
    KnowledgeBase,
    QueueStats,
    Resync,
)
from ktui.tui.messages import BasesLoaded, ServiceEvents, ServiceFailed
from ktui.tui.paging import all_bases
from ktui.tui.text import literal, shorten
from ktui.tui.widgets.status_line import StatusLine


class PaneSync:
    """The service's events and the bases list, applied to the panes (see the module docstring)."""

    # --- events: one worker, time-batched, coalesced ---------------------------

    async def _pump_events(self) -> None:
        sub = self._subscription
        assert sub is not None
        while not sub.closed:
            batch = await sub.next_batch()
            if batch:
                self.post_message(ServiceEvents(batch))
            # while we sleep the subscription coalesces (latest state per item wins)
            await asyncio.sleep(self.refresh_interval)

    def on_service_events(self, message: ServiceEvents) -> None:
        if not self._alive():
            return
        tree = self.item_tree
        base_id = tree.base_id
        changes: dict[str, ItemChanged] = {}
        stats: QueueStats | None = None
        bases_dirty = False
        # a base being rebuilt: its store's state is re-read as its items index (a few bases, once per batch)
        rebuilding = {b.id for b in self.bases_pane.bases.values() if b.needs_rebuild}
        with self.batch_update():
            for ev in message.events:
                match ev:
                    case ItemChanged():
                        if ev.base_id == base_id:
                            changes[ev.item_id] = ev
                        if ev.base_id in rebuilding:
                            bases_dirty = True
                    case ItemsAdded():
                        bases_dirty = True
                        if ev.base_id == base_id:
                            if changes:
                                tree.apply_changes(changes)
                                changes = {}
                            tree.items_added(ev.group_id, ev.item_ids)
                    case ItemsRemoved():
                        bases_dirty = True
                        if ev.base_id == base_id:
                            for item_id in ev.item_ids:
                                changes.pop(item_id, None)
                            tree.remove_items(ev.item_ids)
                    case BaseChanged() | BaseRemoved():
                        bases_dirty = True
                    case QueueStats():
                        stats = ev
                    case Resync():  # another process's changes may have been missed: reload what is shown
                        bases_dirty = True
                        changes = {}
                        if base_id is not None:
                            tree.reload()
            if changes:
                tree.apply_changes(changes)
            if stats is not None:
                self.query_one(StatusLine).update_stats(stats)
        self.batches_applied += 1
        if bases_dirty:
            self.reload_bases()

    # --- bases ------------------------------------------------------------------

    def reload_bases(self) -> None:
        """Fetch bases, groups and counts; at most one fetch in flight, one queued."""
        if self._bases_loading:
            self._bases_dirty = True
            return
        self._bases_loading = True
        self.run_worker(self._fetch_bases(), group="bases", exit_on_error=False)

    async def _fetch_bases(self) -> None:
        try:
            bases = await all_bases(self.ks)
            groups = await self.ks.list_groups()
            counts = await self.ks.item_counts()
        except KnowledgeError as exc:
            self.post_message(ServiceFailed("Loading bases failed", str(exc)))
            self.post_message(BasesLoaded([], [], {}, ok=False))  # clears the in-flight flag
            return
        self.post_message(BasesLoaded(bases, groups, counts))

    def on_bases_loaded(self, message: BasesLoaded) -> None:
        if not self._alive():
            self._bases_loading = False
            return
        self._bases_loading = False
        if message.ok:
            pane = self.bases_pane
            self.groups = {g.id: g.name for g in message.groups}
            pane.show_bases(message.bases, message.groups, message.counts)
            if self._select_after_load and self._select_after_load in pane.bases:
                pane.highlighted = pane.get_option_index(self._select_after_load)
                self._select_after_load = None
            self._sync_selection()
        if self._bases_dirty:
            self._bases_dirty = False
            self.reload_bases()

    def _sync_selection(self) -> None:
        if not self._alive():
            return
        base = self.bases_pane.current_base
        tree = self.item_tree
        base_id = base.id if base else None
        if base_id != tree.base_id:
            tree.load_base(base_id)
            self.search_pane.clear_results()
            if base is not None:
                self.search_pane.set_defaults(base.search_mode.value, base.top_k)
        self.search_pane.show_store_problem(base, self.key("base.reindex"))
        title = self.query_one("#items-title", Label)
        if base is not None:
            title.update(literal(f"Items — {base.emoji} {shorten(base.name, 200)}", one_line=True))
        elif not self.bases_pane.bases:
            title.update(literal(f"No base: {self.key('base.new')} creates one", one_line=True))
        else:
            title.update(literal("Items"))
        self.refresh_bindings()

    def _select_base(self, base: KnowledgeBase | None) -> None:
        if base is not None:
            self._select_after_load = base.id
        self.reload_bases()

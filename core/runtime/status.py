"""StateWriter: the one owner of every catalogue write, and of the events they cause.

Each write of an item's or a base's row goes through one method here, which writes
(through :mod:`ktui.core.data.item_writes` / :mod:`ktui.core.data.base_writes`, which
no other module may import: an import-linter contract in pyproject.toml) and then
publishes the events of exactly what changed:

* an item's state (status, phase, error, payload) -> ``ItemChanged`` for the item and
  every ancestor whose reconciled state changed with it;
* items created -> ``ItemsAdded`` (per parent; roots also get their ``ItemChanged``);
* items deleted -> ``ItemsRemoved`` and the ``ItemChanged`` of reconciled parents;
* a base created, patched or ungrouped -> ``BaseChanged``; deleted -> ``BaseRemoved``.

So a new mutation cannot forget its event: there is no other way to write. The
embedding / OCR progress of a running item is not persisted, but it is published
here too (`progress`), so every ``ItemChanged`` comes from this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ktui.core.catalogue import Catalogue, WriteGuard
from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import ValidItem
from ktui.core.models import (
    BaseChanged,
    BaseRemoved,
    ItemChanged,
    ItemData,
    ItemPhase,
    ItemsAdded,
    ItemsRemoved,
    ItemStatus,
    KnowledgeBase,
    KnowledgeBaseErrorCode,
    KnowledgeGroup,
    KnowledgeItem,
)
from ktui.core.runtime.events import EventBus


def changed_event(item: KnowledgeItem, progress: float | None = None) -> ItemChanged:
    """The event that says what `item`'s row holds now."""
    return ItemChanged(item.base_id, item.id, item.status, item.phase, item.error, progress)


class StateWriter:
    """See the module docstring. One per open data directory (the facade makes it)."""

    def __init__(self, db: Catalogue, bus: EventBus) -> None:
        self._items = ItemWrites(db)
        self._bases = BaseWrites(db)
        self.bus = bus
        # a shared store's relay of progress to the other processes (progress is never written)
        self.relay_progress: Callable[[ItemChanged], None] | None = None

    # --- items: creation ---------------------------------------------------

    async def create_roots(
        self, base_id: str, items: Sequence[ValidItem], *, status: ItemStatus = ItemStatus.PROCESSING
    ) -> list[KnowledgeItem]:
        """Insert root items in one transaction (all or none)."""
        created = await self._items.create_roots(base_id, items, status=status)
        if created:
            self.bus.publish(ItemsAdded(base_id, tuple(i.id for i in created), None))
            self._publish(created)
        return created

    async def create_children(self, base_id: str, parent_id: str, specs: Sequence[ChildSpec], *,
                              guard: WriteGuard | None = None) -> list[KnowledgeItem]:
        """Insert a container's expansion in one transaction; one ``ItemsAdded`` per parent
        (no ``ItemChanged`` per child: a folder of 100,000 files would send as many, and
        a new child's state is `processing`, what ``ItemsAdded`` already implies). A
        `guard` that refuses raises TaskInterrupted: nothing inserted, no event."""
        created = await self._items.create_children(base_id, parent_id, specs, guard=guard)
        by_parent: dict[str | None, list[str]] = {}
        for child in created:
            by_parent.setdefault(child.group_id, []).append(child.id)
        for parent, ids in by_parent.items():
            self.bus.publish(ItemsAdded(base_id, tuple(ids), parent))
        return created

    # --- items: state --------------------------------------------------------

    async def set_status(
        self,
        item_id: str,
        status: ItemStatus,
        phase: ItemPhase | None = None,
        error: str | None = None,
        *,
        progress: float | None = None,
        data: ItemData | None = None,
        guard: WriteGuard | None = None,
    ) -> list[KnowledgeItem]:
        """One item's state (and optionally its payload); `progress` goes on its own event.
        `guard` (core/catalogue.py) may refuse the write: nothing changes, no event."""
        changed = await self._items.set_status(item_id, status, phase, error, data=data, guard=guard)
        self._publish(changed, (lambda i: progress if i == item_id else None) if progress is not None else None)
        return changed

    async def set_status_many(
        self,
        item_ids: Sequence[str],
        status: ItemStatus,
        phase: ItemPhase | None = None,
        error: str | None = None,
        *,
        guard: WriteGuard | None = None,
    ) -> list[KnowledgeItem]:
        """Several items' state in one transaction; `guard` may leave some out (not changed,
        not returned)."""
        changed = await self._items.set_status_many(item_ids, status, phase, error, guard=guard)
        self._publish(changed)
        return changed

    async def set_states(
        self,
        entries: Sequence[tuple[str, ItemStatus, ItemPhase | None]],
        progress: Callable[[str], float | None] | None = None,
        *,
        guard: WriteGuard | None = None,
    ) -> list[KnowledgeItem]:
        """Several items' (status, phase) in one transaction (the phase group commit);
        `progress(item_id)`, asked once the transaction has committed, is carried on
        their events. `guard` may leave items out (not written, no event)."""
        changed = await self._items.set_states(entries, guard=guard)
        self._publish(changed, progress)
        return changed

    async def complete_many(
        self, entries: Sequence[tuple[str, ItemData | None]], *, guard: WriteGuard | None = None
    ) -> list[KnowledgeItem]:
        """Leaves completed (each with its recorded payload) in one transaction; with
        `guard`, only those it allows (the others are left out of the returned items)."""
        changed = await self._items.complete_many(entries, guard=guard)
        self._publish(changed)
        return changed

    async def reconcile(self, container_id: str) -> list[KnowledgeItem]:
        changed = await self._items.reconcile(container_id)
        self._publish(changed)
        return changed

    async def update_data(self, item_id: str, data: ItemData, *, guard: WriteGuard | None = None) -> KnowledgeItem:
        """An item's payload (e.g. a folder's `watch` flag, a refreshed file's stamp); a
        `guard` that refuses raises TaskInterrupted (nothing written)."""
        updated = await self._items.update_data(item_id, data, guard=guard)
        self._publish([updated])
        return updated

    def progress(
        self,
        item: KnowledgeItem,
        phase: ItemPhase,
        fraction: float | None,
        ocr_pages: tuple[int, int] | None = None,
    ) -> None:
        """A running item's progress: published, not written (it changes many times a second)."""
        event = ItemChanged(item.base_id, item.id, ItemStatus.PROCESSING, phase, None, fraction, ocr_pages)
        self.bus.publish(event)
        if self.relay_progress is not None:
            self.relay_progress(event)

    # --- items: deletion -----------------------------------------------------

    async def delete(
        self, base_id: str, item_ids: Sequence[str], removed: Iterable[str] = (), *, guard: WriteGuard | None = None
    ) -> list[KnowledgeItem]:
        """Delete items (their subtrees cascade). ``ItemsRemoved`` names `item_ids` and the
        `removed` descendants the caller looked up; reconciled parents get ``ItemChanged``.
        A `guard` (called with `item_ids`) that refuses raises TaskInterrupted: nothing
        deleted, no event."""
        changed = await self._items.delete(item_ids, guard=guard)
        gone = tuple(dict.fromkeys([*item_ids, *removed]))
        if gone:
            self.bus.publish(ItemsRemoved(base_id, gone))
        self._publish(changed)
        return changed

    async def delete_children(self, base_id: str, container_id: str) -> list[str]:
        """Drop a container's whole subtree (its own row stays); returns the removed ids."""
        below = [d.id for d in await self._items.descendants([container_id])]
        await self._items.delete_children(container_id)
        if below:
            self.bus.publish(ItemsRemoved(base_id, tuple(below)))
        return below

    # --- bases and groups ----------------------------------------------------

    async def create_base(self, **fields: Any) -> KnowledgeBase:
        """A runnable base (see `BaseWrites.create` for the fields)."""
        base = await self._bases.create(**fields)
        self.bus.publish(BaseChanged(base.id))
        return base

    async def create_failed_base(
        self,
        *,
        name: Any,
        dimensions: Any,
        error: KnowledgeBaseErrorCode = KnowledgeBaseErrorCode.MISSING_EMBEDDING_MODEL,
        config: dict[str, Any] | None = None,
        free_name: bool = True,
        import_fingerprint: str | None = None,
    ) -> KnowledgeBase:
        """A recoverable failed base (its embedding model is unknown here)."""
        base = await self._bases.create_failed(
            name=name, dimensions=dimensions, error=error, config=config, free_name=free_name,
            import_fingerprint=import_fingerprint,
        )
        self.bus.publish(BaseChanged(base.id))
        return base

    async def update_base(self, base_id: Any, patch: Any) -> KnowledgeBase:
        base = await self._bases.update(base_id, patch)
        self.bus.publish(BaseChanged(base.id))
        return base

    async def delete_base(self, base_id: str) -> None:
        """The base's rows (its items cascade); its store files are the caller's."""
        await self._bases.delete(base_id)
        self.bus.publish(BaseRemoved(base_id))

    async def create_group(self, name: Any) -> KnowledgeGroup:
        return await self._bases.create_group(name)

    async def rename_group(self, group_id: Any, name: Any) -> KnowledgeGroup:
        return await self._bases.rename_group(group_id, name)

    async def delete_group(self, group_id: Any) -> None:
        """Deleting a group ungroups its bases: each of them changed."""
        members = [b.id for b in await self._bases.list_all() if b.group_id == group_id]
        await self._bases.delete_group(group_id)
        self.bus.publish_all([BaseChanged(b) for b in members])

    # --- events ----------------------------------------------------------------

    def _publish(
        self, items: Iterable[KnowledgeItem], progress: Callable[[str], float | None] | None = None
    ) -> None:
        self.bus.publish_all([changed_event(i, progress(i.id) if progress else None) for i in items])

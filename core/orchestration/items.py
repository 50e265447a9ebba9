"""The item operations: add, delete, reindex, watch, in the orderings callers rely on.

delete-items / reindex-items: collapse to roots → interrupt roots and wait → fresh
descendants → interrupt all and wait → delete leaf vectors → delete root rows
(cascade) | drop container children and prepare again | requeue leaves.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ktui.core.data.base_service import require_runnable
from ktui.core.data.item_validation import validate_item_inputs
from ktui.core.data.validation import ValidItem
from ktui.core.errors import (
    InvalidOperationError,
    KnowledgeError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from ktui.core.models import (
    CONTAINER_TYPES,
    DirectoryItemData,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
)
from ktui.core.orchestration.common import WorkflowParts, source_key
from ktui.core.runtime.queue import InterruptReason
from ktui.core.runtime.remote_interrupts import taking_over
from ktui.core.runtime.service import describe_error

log = logging.getLogger(__name__)

_PATH_TYPES = (ItemType.FILE, ItemType.DIRECTORY)


def _inside(path: str, folder: str) -> bool:
    """`path` is `folder` or below it (both normalised absolute paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _PathOverlaps:
    """Files and folders that would be read twice: a path inside a folder, a folder
    holding a path. Cost per input: the folders (few), plus every path only for an
    input that is itself a folder, so adding 10,000 files stays linear."""

    def __init__(self) -> None:
        self.folders: dict[str, str] = {}  # path -> how to name it in an error
        self.paths: dict[str, str] = {}

    def add(self, kind: ItemType, path: str, name: str) -> None:
        self.paths[path] = name
        if kind == ItemType.DIRECTORY:
            self.folders[path] = name

    def clash(self, kind: ItemType, path: str) -> str | None:
        for folder, name in self.folders.items():
            if _inside(path, folder):
                return f"inside the folder {name}"
        if kind == ItemType.DIRECTORY:
            for other, name in self.paths.items():
                if _inside(other, path):
                    return f"a folder holding {name}"
        return None


class ItemWorkflow(WorkflowParts):

    async def add_items(self, base_id: Any, inputs: Any) -> list[KnowledgeItem]:
        base = require_runnable(await self.bases.get(base_id))
        valid = validate_item_inputs(inputs)
        await self._refuse_duplicates(base, valid)
        return await self._accept(base, valid)

    async def _refuse_duplicates(self, base: KnowledgeBase, valid: Sequence[ValidItem]) -> None:
        """The same file, folder, page or sitemap twice in one base would be indexed twice
        and answer every search twice; reindex is the way to read it again. Notes may
        repeat (two notes can say the same thing on purpose). The same holds for a file
        or folder inside a folder of the base, and for a folder holding one: its files
        would be read twice (found trying the CLI on a real folder)."""
        existing = {source_key(i.type, i.data): i for i in await self.items.list_all(base.id, roots_only=True)}
        held, given = _PathOverlaps(), _PathOverlaps()
        for key in existing:
            if key is not None and key[0] in _PATH_TYPES:
                held.add(key[0], key[1], f"{key[1]}, already in this base")
        errors: dict[str, str] = {}
        seen: dict[tuple[ItemType, str], int] = {}
        for n, item in enumerate(valid):
            key = source_key(item.type, item.data)
            if key is None:
                continue
            field = f"items[{n}].data.{'path' if item.type in _PATH_TYPES else 'url'}"
            if key in existing:
                errors[field] = f"already in this base: {key[1]} (reindex it to read it again)"
            elif key in seen:
                errors[field] = f"given twice (also items[{seen[key]}]): {key[1]}"
            elif item.type in _PATH_TYPES and (why := held.clash(*key) or given.clash(*key)):
                errors[field] = f"its files would be read twice: {key[1]} is {why}"
            else:
                seen[key] = n
                if item.type in _PATH_TYPES:
                    given.add(key[0], key[1], f"items[{n}]")
        if errors:
            raise ValidationError(errors)

    async def _accept(self, base: KnowledgeBase, valid: Sequence[ValidItem]) -> list[KnowledgeItem]:
        """Create the root rows (one transaction) and queue their work; returns at once."""
        created = await self.state.create_roots(base.id, valid)
        try:
            self.runtime.enqueue_items(created)
        except Exception:
            await self.state.delete(base.id, [i.id for i in created])  # roll back what was accepted
            raise
        for item in created:
            if isinstance(item.data, DirectoryItemData) and item.data.watch:
                await self.runtime.follow(base.id, item.id, item.data.path, refresh=False)  # queued above
        return created

    async def delete_items(self, base_id: Any, item_ids: Any) -> None:
        async with self.runtime.recovery.writing():  # never overlaps a recovery batch
            await self._delete_items(base_id, item_ids)

    async def _delete_items(self, base_id: Any, item_ids: Any) -> None:
        base = await self.bases.get(base_id)
        roots = await self.items.collapse_to_roots(base.id, item_ids)
        descendants = await self.runtime.interrupt_tree(roots, InterruptReason.DELETE)
        # shared catalogue: their claims first, so no other process writes for them from here on
        async with taking_over(self.runtime, [i.id for i in [*roots, *descendants]]):
            await self._delete_tree(base, roots, descendants)

    async def _delete_tree(self, base: KnowledgeBase, roots: list[KnowledgeItem],
                           descendants: list[KnowledgeItem]) -> None:
        # Vectors go before rows; a crash in between must not leave the items `completed`
        # with no chunks. Marked unfinished first (published like every write: a
        # subscriber sees `processing`, then the removal); after a crash, recovery
        # indexes them again, as if the delete had never started.
        roots, _ = await self._mark_unfinished(roots)
        leaves = [i.id for i in [*roots, *descendants] if i.type not in CONTAINER_TYPES]
        try:
            await self.runtime.delete_vectors(base, leaves)
        except Exception as exc:
            await self._record_cleanup_failure(roots, exc)
            raise
        for root in roots:
            self.runtime.watcher.unwatch(root.id)
        await self.state.delete(base.id, [r.id for r in roots], [d.id for d in descendants])

    async def _mark_unfinished(self, roots: list[KnowledgeItem]) -> tuple[list[KnowledgeItem], list[KnowledgeItem]]:
        """Mark roots unfinished (containers `processing/preparing`, leaves `processing`),
        only those that still exist: an overlapping delete may have removed some since they
        were looked up. Failing half-way with "not found" would leave the containers marked
        and nothing queued for them — processing while the queue is idle. Returns the roots
        that were marked and the rows that changed."""
        for _ in range(8):
            roots = await self.items.get_many([r.id for r in roots])
            try:
                changed = await self.state.set_status_many(
                    [r.id for r in roots if r.type in CONTAINER_TYPES], ItemStatus.PROCESSING, ItemPhase.PREPARING
                )
                changed += await self.state.set_status_many(
                    [r.id for r in roots if r.type not in CONTAINER_TYPES], ItemStatus.PROCESSING
                )
            except NotFoundError:
                continue  # another call removed one meanwhile: look again
            return roots, changed
        raise InvalidOperationError("the items keep changing under this call; try again")

    async def reindex_items(self, base_id: Any, item_ids: Any, *, force: bool = False) -> list[KnowledgeItem]:
        """Index the selection again. A folder is refreshed incrementally (only new and
        changed files are read; deleted ones removed) unless `force` rebuilds it.
        With `force`, a base whose store file is corrupt or missing gets a fresh store
        and ALL its items are reindexed (the old file is kept as *.corrupt-<stamp>)."""
        async with self.runtime.recovery.writing():  # never overlaps a recovery batch
            return await self._reindex_items(base_id, item_ids, force=force)

    async def _reindex_items(self, base_id: Any, item_ids: Any, *, force: bool = False) -> list[KnowledgeItem]:
        base = require_runnable(await self.bases.get(base_id))
        roots = await self.items.collapse_to_roots(base.id, item_ids)
        fresh_store = force and await self.runtime.rebuild_store_if_unreadable(base)
        if fresh_store:
            # the damaged store was set aside: no item of the base has vectors any more
            roots = await self.items.list_all(base.id, roots_only=True)
        descendants = await self.runtime.interrupt_tree(roots, InterruptReason.REINDEX)
        # shared catalogue: their claims first, so no other process writes for them from here on
        async with taking_over(self.runtime, [i.id for i in [*roots, *descendants]]):
            return await self._reset(base, roots, force=force, fresh_store=fresh_store)

    async def _reset(self, base: KnowledgeBase, roots: list[KnowledgeItem], *, force: bool,
                     fresh_store: bool) -> list[KnowledgeItem]:
        rebuilt = [r for r in roots if force or r.type != ItemType.DIRECTORY]
        # Mark what is rebuilt as unfinished BEFORE its vectors and children go: a crash
        # in between must leave it for recovery to redo, not `completed` with nothing in
        # it. A rebuilt container is marked `preparing` so recovery prepares it afresh
        # (processing without a phase would be reconciled from its children).
        rebuilt, _ = await self._mark_unfinished(rebuilt)
        kept = {r.id for r in rebuilt}
        roots = [r for r in roots if r.id in kept or r.type == ItemType.DIRECTORY and not force]
        leaves = [i.id for i in await self.items.leaves_under([r.id for r in rebuilt])]
        try:
            await self.runtime.delete_vectors(base, leaves, skip_damaged=not force)
        except StoreError as exc:
            if force and not fresh_store:
                # damaged inside (it opened, but a write failed): set it aside too, then
                # reindex every root on the fresh store
                await self.runtime.rebuild_store(base, str(exc))
                everything = await self.items.list_all(base.id, roots_only=True)
                return await self._reindex_items(base.id, [r.id for r in everything], force=True)
            await self._record_cleanup_failure(roots, exc)
            raise
        except Exception as exc:
            await self._record_cleanup_failure(roots, exc)
            raise
        for root in rebuilt:
            if root.type in CONTAINER_TYPES:
                await self.state.delete_children(base.id, root.id)
        refreshed = [r.id for r in await self.items.get_many([r.id for r in roots]) if r.id not in kept]
        await self.state.set_status_many(refreshed, ItemStatus.PROCESSING)
        fresh = await self.items.get_many([r.id for r in roots])
        self.runtime.enqueue_items(fresh)
        return fresh

    async def set_watch(self, base_id: Any, item_id: Any, watch: Any) -> KnowledgeItem:
        """Follow (or stop following) a folder item's changes while ktui runs."""
        base, item = await self._item_of(base_id, item_id)
        require_runnable(base)
        if not isinstance(watch, bool):
            raise ValidationError.field("watch", "must be true or false")
        if not isinstance(item.data, DirectoryItemData) or not item.is_root:
            raise ValidationError.field("item_id", "only a top-level directory item can be watched")
        updated = await self.state.update_data(item.id, replace(item.data, watch=watch))
        if watch:
            await self.runtime.follow(base.id, item.id, item.data.path, refresh=True)
        else:
            await self.runtime.unfollow(item.id)
        return updated

    async def _record_cleanup_failure(self, roots: Sequence[KnowledgeItem], exc: Exception) -> None:
        """Write a cleanup error on the affected items before the caller re-raises it."""
        try:
            await self.state.set_status_many(
                [r.id for r in roots], ItemStatus.FAILED, None, f"Cleanup failed: {describe_error(exc)}"
            )
        except KnowledgeError:
            log.exception("could not record the cleanup failure")


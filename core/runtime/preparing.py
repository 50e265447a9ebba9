"""Preparing a container (a folder or a sitemap), and refreshing a watched folder.

processing/preparing → expand (directory walk / sitemap fetch) → create the children
(nested directories as directory rows) → enqueue the leaves → phase cleared, so the
container is reconciled from its children. A folder prepared again (a refresh from
the watcher, or at open) is brought in line with what is on disk: files gone are
deleted with their vectors, new ones created, changed ones reindexed (refresh.py
plans it).

On a shared catalogue (PostgreSQL) each of those writes lands only while this process
still holds the container's claim, checked inside the write's own transaction
(``WorkClaims.holding_container``): a process whose claim expired and was taken over
writes no phase, no payload and no child of it any more (nor removes one, nor its
vectors), and its task ends quietly. On SQLite nothing is checked (one writer).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from ktui.core.catalogue import SyncConn, WriteGuard
from ktui.core.data.item_service import ChildSpec
from ktui.core.errors import IngestError, KnowledgeError, TaskInterrupted
from ktui.core.models import (
    CONTAINER_TYPES,
    DirectoryItemData,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
    SitemapItemData,
    UrlItemData,
)
from ktui.core.runtime.indexing import ocr_options_for
from ktui.core.runtime.queue import InterruptReason, InterruptToken, Task, TaskKind

if TYPE_CHECKING:
    from ktui.core.ingest.expand import DirectoryListing
    from ktui.core.runtime.service import KnowledgeRuntimeService
    from ktui.core.store import ChunkStore

log = logging.getLogger(__name__)


class ContainerPreparer:
    """Runs `prepare-root` tasks and folder refreshes for the runtime."""

    def __init__(self, runtime: KnowledgeRuntimeService) -> None:
        self.runtime = runtime
        self._dirty: set[str] = set()  # folders changed again while their refresh was queued/running
        self._refreshing: set[str] = set()  # folders whose refresh request is being set up

    async def watch_all(self) -> list[KnowledgeItem]:
        """Watch every watched folder again (one query; no refresh yet): at a holder's
        open, before recovery, so no change is missed while it runs (refreshes asked for
        meanwhile wait for its end)."""
        usable = {b.id for b in await self.runtime.bases.list_all() if b.is_usable}
        folders = [i for i in await self.runtime.items.watched_directories()
                   if i.base_id in usable and isinstance(i.data, DirectoryItemData)]
        for item in folders:
            assert isinstance(item.data, DirectoryItemData)
            self.runtime.watcher.watch(item.base_id, item.id, item.data.path)
        return folders

    async def resume_watches(self) -> None:
        """Watch every watched folder again, and refresh each once to pick up what changed
        while ktui was closed. The refreshes are queued when this returns (so `wait_idle`
        after it sees them); one held while recovery ran is this one."""
        for item in await self.watch_all():
            self.runtime.recovery.forget_held(item.id)
            if self._claim(item.id):
                await self._start_refresh(item.base_id, item.id)

    async def follow(self, base_id: str, item_id: str, path: str) -> None:
        """Watch one folder and refresh it once (a shared catalogue's follower taking it
        over: following.py); the refresh is queued when this returns."""
        self.runtime.watcher.watch(base_id, item_id, path)
        self.runtime.recovery.forget_held(item_id)
        if self._claim(item_id):
            await self._start_refresh(base_id, item_id)

    def request_refresh(self, base_id: str, item_id: str) -> None:
        """Queue an incremental refresh of a folder item (the watcher's callback). While a
        recovery pass runs it is held and asked for again when the pass ends: a refresh
        marks the folder `processing` apart from the queue, which a pass must not see."""
        if self.runtime.closed or self.runtime.recovery.hold_refresh(base_id, item_id):
            return
        if self._claim(item_id):
            asyncio.get_running_loop().create_task(self._start_refresh(base_id, item_id))

    def _claim(self, item_id: str) -> bool:
        """True when this caller starts the refresh; False when one is queued, running or
        being set up (then it runs once more after that one: `_dirty`)."""
        if self.runtime.closed:
            return False
        if self.runtime.queue.is_active(item_id) or item_id in self._refreshing:
            self._dirty.add(item_id)
            return False
        self._refreshing.add(item_id)
        return True

    async def _start_refresh(self, base_id: str, item_id: str) -> None:
        try:
            claims = self.runtime.claims
            # shared: hold the folder first, so no other process's sweep takes it (and
            # reconciles it instead of refreshing it) between the status and the task
            if claims.shared and not await claims.claim([item_id], any_status=True):
                return
            item = await self.runtime.items.get(item_id)
            # no interruption: the refresh leaves queued files alone and restarts running ones it must
            await self.runtime.state.set_status(item.id, ItemStatus.PROCESSING, guard=self._guard(item.id))
            self.runtime.queue.enqueue(TaskKind.PREPARE_ROOT, base_id, item_id)
        except TaskInterrupted:
            return  # taken over since the claim: the other process refreshes it
        except KnowledgeError:
            self.runtime.watcher.unwatch(item_id)  # the item is gone
        except Exception:
            log.exception("could not start the refresh of %s", item_id)
        finally:
            self._refreshing.discard(item_id)

    def _guard(self, item_id: str, *, store: ChunkStore | None = None, vectors_of: list[str] | None = None) -> WriteGuard | None:
        """A write made for the container `item_id` (module docstring): None on SQLite;
        on a shared catalogue the guard raises TaskInterrupted, in the write's transaction
        (so nothing of it lands), once this process no longer holds the container."""
        claims = self.runtime.claims
        if not claims.shared:
            return None
        inner = claims.holding_container(item_id, store=store, vectors_of=vectors_of or ())
        if inner is None:
            return None
        held_check = inner

        def guard(conn: SyncConn, ids: list[str]) -> list[str]:
            allowed = held_check(conn, ids)
            if set(allowed) != set(ids):
                raise TaskInterrupted("claimed by another process")
            return allowed

        return guard

    async def run(self, task: Task, base: KnowledgeBase, item: KnowledgeItem) -> bool:
        try:
            return await self.runtime.guarded(
                task.token, base, item, self._steps(task.token, base, item),
                verb="preparing", remove_vectors=False,
            )
        finally:
            if item.id in self._dirty:
                self._dirty.discard(item.id)
                if not self.runtime.closed and not task.token.interrupted:
                    self.request_refresh(base.id, item.id)

    async def _steps(self, token: InterruptToken, base: KnowledgeBase, item: KnowledgeItem) -> None:
        from ktui.core.ingest import expand_sitemap

        token.check()
        guard = self._guard(item.id)
        await self.runtime.state.set_status(item.id, ItemStatus.PROCESSING, ItemPhase.PREPARING, guard=guard)
        if isinstance(item.data, DirectoryItemData):
            await self._prepare_directory(token, base, item)
        elif isinstance(item.data, SitemapItemData):
            urls = await token.run(expand_sitemap(item.data.url, self.runtime.settings.ingest, self.runtime.fetcher))
            token.check()
            specs = [ChildSpec(ItemType.URL, UrlItemData(url=u, source=u)) for u in urls]
            await self._create_children(base, item.id, item.id, specs)
        else:  # pragma: no cover - only containers are prepared
            raise IngestError(f"{item.type} items are not containers")
        # phase cleared: reconciled from the children
        await self.runtime.state.set_status(item.id, ItemStatus.PROCESSING, guard=guard)

    async def _prepare_directory(self, token: InterruptToken, base: KnowledgeBase, item: KnowledgeItem) -> None:
        """Walk the folder and bring the children in line with it (all new the first time)."""
        from ktui.core.ingest import expand_directory
        from ktui.core.ingest.pipeline import chunking_signature
        from ktui.core.runtime.refresh import plan_refresh

        existing = await self.runtime.items.descendants([item.id])
        assert isinstance(item.data, DirectoryItemData)
        try:
            listing = await expand_directory(
                item.data.path, self.runtime.settings.ingest, images=ocr_options_for(self.runtime.settings, base).enabled
            )
        except IngestError:
            # the folder vanished or holds nothing indexable: none of its old files may stay
            # searchable. A watched one stays watched: the watcher refreshes it once it is back.
            if existing:
                token.check()
                await self._remove_children(base, item.id, existing, [c for c in existing if c.group_id == item.id])
            raise
        token.check()
        signature = chunking_signature(base.chunk_size, base.chunk_overlap)
        queued = frozenset(c.id for c in existing if self.runtime.queue.is_pending(c.id))
        plan = await asyncio.to_thread(plan_refresh, item, listing, existing, signature, queued=queued)
        token.check()
        if plan.delete:
            below = {c.id for c in await self.runtime.items.descendants([d.id for d in plan.delete])}
            doomed = [c for c in existing if c.id in below] + plan.delete
            await self._remove_children(base, item.id, doomed, plan.delete)
        guard = self._guard(item.id)
        for child, data in plan.touch:
            await self.runtime.state.update_data(child.id, data, guard=guard)
        for parent_id, specs in plan.create.items():
            await self._create_children(base, item.id, parent_id, specs)
        await self._record_skipped(item, listing)
        if plan.reindex:
            ids = [c.id for c in plan.reindex]
            # a leaf being read right now may have read the old content: start it again
            await self.runtime.interrupt_and_wait([i for i in ids if self.runtime.queue.is_running(i)], InterruptReason.REINDEX)
            await self.runtime.state.set_status_many(ids, ItemStatus.PROCESSING, guard=guard)
            self.runtime.queue.enqueue_many(TaskKind.INDEX_LEAF, base.id, ids)

    async def _record_skipped(self, item: KnowledgeItem, listing: DirectoryListing) -> None:
        """Keep what the walk left out (and why) on the folder item, for its detail and
        the CLI summary; written only when it changed."""
        report = listing.skipped.as_dict() if listing.skipped is not None and listing.skipped.total else None
        current = await self.runtime.items.get(item.id)
        if isinstance(current.data, DirectoryItemData) and current.data.skipped != report:
            await self.runtime.state.update_data(item.id, replace(current.data, skipped=report),
                                                 guard=self._guard(item.id))

    async def _create_children(self, base: KnowledgeBase, root_id: str, parent_id: str, specs: list[ChildSpec]) -> None:
        created = await self.runtime.state.create_children(base.id, parent_id, specs, guard=self._guard(root_id))
        self.runtime.queue.enqueue_many(TaskKind.INDEX_LEAF, base.id, [c.id for c in created if c.type not in CONTAINER_TYPES])

    async def _remove_children(
        self, base: KnowledgeBase, root_id: str, doomed: list[KnowledgeItem], tops: list[KnowledgeItem]
    ) -> None:
        """Delete children of the container `root_id` with their vectors: interrupt, vectors
        first, then the rows; on a shared catalogue both in one transaction, under the
        container's claim."""
        ids = [c.id for c in doomed]
        leaves = [c.id for c in doomed if c.type not in CONTAINER_TYPES]
        await self.runtime.interrupt_and_wait(ids, InterruptReason.DELETE)
        if self.runtime.claims.shared:
            store = await self.runtime.store(base) if leaves and base.is_usable else None
            async with self.runtime.lock(base.id):  # the base's vector writes, as delete_vectors
                await self.runtime.state.delete(base.id, [t.id for t in tops], ids,
                                                guard=self._guard(root_id, store=store, vectors_of=leaves))
            return
        await self.runtime.delete_vectors(base, leaves)
        await self.runtime.state.delete(base.id, [t.id for t in tops], ids)

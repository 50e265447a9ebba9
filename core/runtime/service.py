"""KnowledgeRuntimeService: executes indexing and retrieval work.

It owns the shared task queue, the per-base write locks, interruption, crash and
shutdown recovery, and publishes every state change on the event bus. Each job
has its own module; this one wires them together and holds what they share:

* ``indexing.py``   — an `index-leaf` task: read, chunk, embed, store, complete;
* ``preparing.py``  — a `prepare-root` task (folder / sitemap) and folder refreshes;
* ``recovery.py``   — what a shutdown interrupted or a crash left `processing`, in the
  background of a holder (its batches never overlap a delete / reindex / delete-base);
* ``disk_space.py`` — a full disk pauses the queue until there is space again;
* ``stats.py``      — the queue figures (rate, QueueStats);
* ``queue.py``, ``group_commit.py``, ``read_ahead.py``, ``parse_pool.py``,
  ``watcher.py``, ``events.py`` — the machinery the tasks run on.

Any error in a task: the item's vectors are removed and it is failed with the
message (:meth:`KnowledgeRuntimeService.guarded`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ktui.core.config import Settings
from ktui.core.data.base_service import KnowledgeBaseService
from ktui.core.data.item_service import KnowledgeItemService
from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import (
    DiskFullError,
    KnowledgeError,
    StoreDamagedError,
    StoreError,
    TaskInterrupted,
)
from ktui.core.models import (
    CONTAINER_TYPES,
    ItemStatus,
    KnowledgeBase,
    KnowledgeItem,
    QueueStats,
)
from ktui.core.runtime.batches import BatchIndexer
from ktui.core.runtime.claims import NO_CLAIMS, WorkClaims
from ktui.core.runtime.disk_space import SpaceGuard
from ktui.core.runtime.events import EventBus
from ktui.core.runtime.failing import fail_held
from ktui.core.runtime.following import FolderFollowing, ProcessClaims
from ktui.core.runtime.heartbeat import Heartbeat, offers_containers, offers_work
from ktui.core.runtime.indexing import LeafIndexer, ocr_options_for
from ktui.core.runtime.parse_pool import ParsePool
from ktui.core.runtime.preparing import ContainerPreparer
from ktui.core.runtime.queue import InterruptReason, InterruptToken, Settle, Task, TaskKind, TaskQueue
from ktui.core.runtime.read_ahead import ReadAhead
from ktui.core.runtime.recovery import DISK_FULL_PREFIX, SHUTDOWN_MESSAGE, Gate, Recovery, describe_error
from ktui.core.runtime.remote_interrupts import RemoteInterrupts
from ktui.core.runtime.stats import QueueFigures
from ktui.core.runtime.status import StateWriter
from ktui.core.runtime.watcher import FolderWatcher
from ktui.core.store import ChunkStore, Stores

if TYPE_CHECKING:
    from ktui.core.ingest import Fetcher

log = logging.getLogger(__name__)

# With `ingest.pipelining` (on by default): files read (and embedded) ahead, a provider batch
# whatever `concurrency` is (measured: tests/benchmarks/test_bench_speedups.py, docs/benchmarks.md).
READ_AHEAD_FILES = 64
BATCH_FILES = 64  # plain-text files per batch at most (batches.py)


async def _nothing() -> None:
    return None


class KnowledgeRuntimeService:
    def __init__(
        self,
        *,
        settings: Settings,
        bases: KnowledgeBaseService,
        items: KnowledgeItemService,
        state: StateWriter,
        stores: Stores,
        embeddings: EmbeddingService,
        bus: EventBus,
        claims: WorkClaims = NO_CLAIMS,
        process_claims: ProcessClaims | None = None,
    ):
        self.settings = settings
        self.bases = bases
        self.items = items  # reads; every write goes through `state`, which publishes its events
        self.state = state
        self.stores = stores
        self.embeddings = embeddings
        self.bus = bus
        self.claims = claims  # who may run an item when several processes share the catalogue (claims.py)
        self.heartbeat: Heartbeat | None = None  # on a shared catalogue: renewals and fair-share sweeps
        self._heartbeat: asyncio.Task[None] | None = None
        # a shared catalogue's followed folders and imports in flight (following.py)
        self.following = FolderFollowing(self, process_claims) if process_claims is not None else None
        self._discard: Callable[[], Awaitable[None]] | None = None  # a shared catalogue's interrupted imports
        self._fetcher: Fetcher | None = None
        # batches of plain-text files (batches.py) with `ingest.pipelining`; never where
        # the catalogue is shared: a PostgreSQL lease is per item
        batched = settings.ingest.pipelining and not claims.shared
        self.queue = TaskQueue(self._run_task, concurrency=settings.concurrency,
                               batch_runner=self._run_batch if batched else None, batch_limit=BATCH_FILES)
        self.queue.on_change = self._queue_changed
        self._locks: dict[str, asyncio.Lock] = {}
        self.recovery = Recovery(self)
        self.figures = QueueFigures(self.queue, bus, slow=embeddings.slow_providers,
                                    recovering=lambda: (self.recovery.remaining, self.recovery.error))
        self._closed = False
        self.indexer = LeafIndexer(self)
        self.batches = BatchIndexer(self)
        self.preparer = ContainerPreparer(self)
        self.remote_interrupts = RemoteInterrupts(self)  # fed another process's resets (shared catalogue)
        self.space = SpaceGuard(self.queue, settings.data_dir, self.recover)
        # a missing folder stays watched (looked for again) unless following.py re-adopts it
        self.watcher = FolderWatcher(self.request_refresh, retry_missing=self.following is None)
        self.parse_pool = ParsePool(settings.ingest.parse_workers, settings.ingest.parse_timeout,
                                    settings.ingest.parse_memory_mb)
        self.read_ahead = ReadAhead(
            self.queue, items, self.parse_pool, settings.ingest,
            # off unless `ingest.pipelining` (see READ_AHEAD_FILES)
            depth=max(settings.concurrency, READ_AHEAD_FILES) if settings.ingest.pipelining else 0,
            embed_ahead=self.indexer.embed_ahead,
            ocr_for=lambda base: ocr_options_for(settings, base),
        )

    @property
    def fetcher(self) -> Fetcher:
        """The shared HTTP client for pages and sitemaps, made on first use: a process
        that only searches never imports the fetching machinery."""
        if self._fetcher is None:
            from ktui.core.ingest import Fetcher

            self._fetcher = Fetcher(self.settings.ingest)
        return self._fetcher

    # --- lifecycle --------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    async def start(
        self,
        *,
        recover: bool = True,
        watch: bool = True,
        before_recovery: Callable[[], Awaitable[None]] | None = None,
        recovery_gate: Gate | None = None,
    ) -> None:
        """Start the queue and return. With `recover` (the long-running holders: TUI,
        `ktui wait`, `ktui serve`, `ktui watch`), unfinished work is re-queued and watched
        folders resumed by a background task (recovery.py): reads answer meanwhile,
        `wait_idle` waits for it. One-shot commands start without it, so they never
        replay other work. `before_recovery` runs first (the facade discards interrupted
        imports, so recovery does not re-queue them); `recovery_gate` is awaited before
        each recovery batch (tests hold recovery at a chosen point). `watch=False`
        recovers without following the watched folders. On a shared catalogue with `process_claims`, `watch` follows the
        folders this process may follow (following.py) instead, and `before_recovery`
        runs again at every heartbeat of a recovering process (an import interrupted
        elsewhere is discarded once its lease expires)."""
        self.queue.start()
        await self.space.start()
        await self.remove_stray_store_files()
        if before_recovery is not None:
            await before_recovery()
        following = self.following
        if recover:
            then: Callable[[], Awaitable[None]] = _nothing
            if following is not None:
                following.enabled = watch
                self._discard = before_recovery
                then = self._adopt_folders
            elif watch:
                await self.preparer.watch_all()  # followed from now; their refreshes come after recovery
                then = self.resume_watches
            self.recovery.start(then=then, gate=recovery_gate)
        if self.claims.shared:
            self.heartbeat = Heartbeat(self, sweep=recover)
            self._heartbeat = asyncio.get_running_loop().create_task(self.heartbeat.run(), name="ktui-claims")

    async def beat_process_leases(self) -> None:
        """At a heartbeat (not at the idle sweeps between): renew this process's import and
        folder leases and follow what it may (following.py), then discard the imports
        interrupted elsewhere whose lease expired (`before_recovery`, recovering processes)."""
        if self.following is not None:
            await self.following.beat()
        if self._discard is not None:
            await self._discard()

    async def _adopt_folders(self) -> None:
        if self.following is not None:
            await self.following.adopt()

    async def remove_stray_store_files(self) -> list[str]:
        """Delete files under bases/ that belong to no base: what a base create or delete
        killed half-way left behind (rows and store files are not one transaction)."""
        known = {b.id for b in await self.bases.list_all()}
        removed: list[str] = []
        for path in await asyncio.to_thread(self.stores.stray_files, known):
            try:
                await asyncio.to_thread(path.unlink)
                removed.append(str(path))
            except OSError as exc:
                log.warning("could not remove the leftover %s: %s", path, exc)
        if removed:
            log.info("removed %d leftover store file(s) of deleted bases", len(removed))
        return removed

    async def resume_watches(self) -> None:
        """Watch every watched folder again, and refresh each once (preparing.py)."""
        await self.preparer.resume_watches()

    async def follow(self, base_id: str, item_id: str, path: str, *, refresh: bool) -> None:
        """Watch was turned on for a folder (added with watch, `set_watch`): follow it here
        (and refresh it once with `refresh`); on a shared catalogue only where the rule of
        following.py lets this process (else another one on the folder's machine does)."""
        if self.following is not None:
            await self.following.follow(base_id, item_id, path, refresh=refresh)
            return
        self.watcher.watch(base_id, item_id, path)
        if refresh:
            self.request_refresh(base_id, item_id)

    async def unfollow(self, item_id: str) -> None:
        """Watch was turned off for a folder: nobody follows it any more."""
        if self.following is not None:
            await self.following.forget(item_id)
        else:
            self.watcher.unwatch(item_id)

    def request_refresh(self, base_id: str, item_id: str) -> None:
        """Queue an incremental refresh of a folder item (the watcher's callback)."""
        self.preparer.request_refresh(base_id, item_id)

    async def recover(self) -> list[str]:
        """Re-queue what a shutdown interrupted or a crash left `processing` now, after any
        pass that runs (recovery.py); DiskFullError propagates."""
        return await self.recovery.run_pass()

    async def close(self) -> None:
        """Interrupt running work, mark everything unfinished failed ("interrupted by shutdown")."""
        if self._closed:
            return
        self._closed = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        self.space.close()
        await self.recovery.close()  # between batches: nothing it started is half-done
        await self.watcher.close()
        running = list(self.queue._running)
        dropped = await self.queue.close()
        await self.read_ahead.close()
        unfinished = [t.item_id for t in dropped] + running
        if self.claims.shared:  # left `processing` for the other processes, claims given back
            unfinished = []
            try:
                await self.claims.close()
            except Exception as exc:  # expired claims come back to the others anyway
                log.warning("could not give back this process's claims: %s", describe_error(exc))
        if unfinished:
            existing = [i for i in await self.items.get_many(unfinished) if i.status == ItemStatus.PROCESSING]
            if existing:
                try:
                    await self.state.set_status_many([i.id for i in existing], ItemStatus.FAILED, None, SHUTDOWN_MESSAGE)
                except DiskFullError as exc:  # left `processing`: the next open re-queues them anyway
                    log.warning("could not mark unfinished work at shutdown: %s", exc)
        await self.remote_interrupts.close()
        self.figures.cancel()
        if self._fetcher is not None:
            await self._fetcher.aclose()
        await self.parse_pool.close()

    # --- scheduling -------------------------------------------------------

    def enqueue_items(self, items: Iterable[KnowledgeItem]) -> None:
        for item in items:
            kind = TaskKind.PREPARE_ROOT if item.type in CONTAINER_TYPES else TaskKind.INDEX_LEAF
            self.queue.enqueue(kind, item.base_id, item.id)

    async def interrupt_and_wait(self, item_ids: Sequence[str], reason: InterruptReason) -> set[str]:
        affected = self.queue.interrupt(item_ids, reason)
        await self.queue.wait_settled(item_ids)
        return affected

    async def interrupt_tree(self, roots: Sequence[KnowledgeItem], reason: InterruptReason) -> list[KnowledgeItem]:
        """The two-stage interrupt: roots first (a running prepare may still be creating
        children), then a fresh query of the descendants and roots + descendants again.
        Returns the descendants as they are now."""
        root_ids = [r.id for r in roots]
        await self.interrupt_and_wait(root_ids, reason)
        descendants = await self.items.descendants(root_ids)
        await self.interrupt_and_wait(root_ids + [d.id for d in descendants], reason)
        return descendants

    async def interrupt_base(self, base_id: str, reason: InterruptReason) -> set[str]:
        affected = self.queue.interrupt_base(base_id, reason)
        await self.queue.wait_settled(affected)
        return affected

    async def delete_vectors(self, base: KnowledgeBase, item_ids: Sequence[str], *, skip_damaged: bool = True) -> None:
        """Remove these items' chunks. A store that cannot be opened (missing or set aside
        as damaged) holds nothing to remove — its rebuild reindexes what is left — so that
        is skipped unless `skip_damaged=False` (a forced reindex wants to know)."""
        if not item_ids or not base.is_usable:
            return  # a failed base has no store to clean
        async with self.lock(base.id):
            try:
                store = await self.store(base)
            except StoreDamagedError:
                if skip_damaged:
                    return
                raise
            await asyncio.to_thread(store.delete_items, item_ids)

    async def rebuild_store_if_unreadable(self, base: KnowledgeBase) -> bool:
        """Before a forced reindex: a store that cannot be opened (corrupt or missing file)
        is set aside and recreated empty. True when that happened: every vector of the
        base is gone, so the caller must reindex all of its items."""
        try:
            await self.store(base)
            return False
        except StoreError as exc:
            await self.rebuild_store(base, str(exc))
            return True

    async def rebuild_store(self, base: KnowledgeBase, reason: str) -> None:
        """Set the base's store aside (kept as *.corrupt-<stamp>) and start an empty one."""
        assert base.dimensions is not None, "only a usable base has a store"
        async with self.lock(base.id):
            moved = await asyncio.to_thread(self.stores.rebuild, base.id, base.dimensions)
        kept = f"old file kept as {moved}" if moved is not None else "no old file to keep"
        log.warning("rebuilding the store of base %s (%s); %s", base.id, reason, kept)

    async def wait_idle(self, base_id: str | None = None) -> None:
        """Until recovery has queued what it found (and the watched folders' refreshes),
        then until the queue is idle (or paused with nothing running). On a shared
        catalogue, a process that sweeps takes a handful at a time (heartbeat.py), so it
        is idle only once its sweep finds nothing more that nobody alive holds."""
        while True:
            await self.recovery.wait()
            await self.queue.wait_idle(base_id)
            if self.heartbeat is None or not self.heartbeat.sweep or self.queue.paused is not None or self._closed:
                return
            if not await self.recovery.run_pass():
                return

    def pause_for_space(self, exc: DiskFullError) -> None:
        """Pause the queue until the disk has room again (disk_space.py)."""
        if not self._closed:
            self.space.pause_for_space(exc)

    def lock(self, base_id: str) -> asyncio.Lock:
        """The per-base write lock: vector writes and their status writes of one base are
        serialised; other bases never wait on it."""
        return self._locks.setdefault(base_id, asyncio.Lock())

    def forget_base(self, base_id: str) -> None:
        self._locks.pop(base_id, None)
        self.indexer.forget_base(base_id)

    async def store(self, base: KnowledgeBase) -> ChunkStore:
        if base.dimensions is None:
            raise StoreError(f"Knowledge base {base.name} has no vector store (unknown dimensions)")
        store = self.stores.get_if_open(base.id, base.dimensions)
        if store is not None:
            return store
        return await asyncio.to_thread(self.stores.get, base.id, base.dimensions)

    # --- tasks ------------------------------------------------------------

    async def _run_task(self, task: Task) -> bool:
        claims = self.claims
        if not claims.shared:
            return await self._run_claimed(task)
        if not await claims.claim([task.item_id], any_status=task.kind == TaskKind.PREPARE_ROOT):
            raise TaskInterrupted("claimed by another process")  # it runs there; not counted here
        try:
            completed = await self._run_claimed(task)
        except BaseException:
            await self._give_back(task.item_id)  # interrupted, deleted, crashed: still ours
            raise
        if not (completed and task.kind == TaskKind.INDEX_LEAF):
            await self._give_back(task.item_id)
        # else the leaf's completion deleted the claim in the transaction that completed it
        # (one refused there raises instead): giving it back again is a wasted round trip
        return completed

    async def _give_back(self, item_id: str) -> None:
        """Release a task's claim that its completion did not take back."""
        try:
            await asyncio.shield(self.claims.release([item_id]))
        except Exception as exc:  # it expires by itself
            log.warning("could not give back the claim of %s: %s", item_id, describe_error(exc))

    async def _run_claimed(self, task: Task) -> bool:
        try:
            item, base = await self.items.get_with_base(task.item_id)
        except KnowledgeError:
            return False  # deleted while queued
        if task.kind == TaskKind.PREPARE_ROOT:
            return await self.preparer.run(task, base, item)
        return await self.indexer.run(task, base, item)

    async def _run_batch(self, tasks: list[Task], settle: Settle) -> None:
        """A batch of `index-leaf` tasks of one base (queue.py, batches.py)."""
        await self.batches.run_tasks(tasks, settle)

    async def guarded(
        self,
        token: InterruptToken,
        base: KnowledgeBase,
        item: KnowledgeItem,
        steps: Awaitable[None],
        *,
        verb: str,
        remove_vectors: bool,
        settle: Callable[[], Awaitable[None]] | None = None,
    ) -> bool:
        """Run a task's steps and record how they ended: True when they completed, False
        when the item failed (its message written); interruptions propagate."""
        try:
            await steps
            return True
        except TaskInterrupted:
            if settle is not None:
                await settle()
            if token.reason == InterruptReason.SHUTDOWN and not self.claims.shared:  # shared: another process resumes it
                await self.fail(base, item, SHUTDOWN_MESSAGE, remove_vectors=False)
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if settle is not None:
                await settle()
            if not isinstance(exc, (KnowledgeError, OSError)):
                log.exception("%s %s failed unexpectedly", verb, item.source)
            if isinstance(exc, DiskFullError):
                self.pause_for_space(exc)
            await self.fail(base, item, describe_error(exc), remove_vectors=remove_vectors)
            return False

    async def fail(
        self, base: KnowledgeBase, item: KnowledgeItem, message: str, *, remove_vectors: bool = True
    ) -> None:
        """Remove what the item wrote and record the failure. Never raises for a vanished item.
        On a shared catalogue both happen in one transaction, only while this process still
        holds the item (claims.py ``failing``): one that lost it to another process leaves
        that one's vectors and state alone."""
        if self.claims.shared:
            await fail_held(self, base, [item.id], message, remove_vectors=remove_vectors)
            return
        try:
            if remove_vectors and base.dimensions is not None:
                async with self.lock(base.id):
                    store = await self.store(base)
                    await asyncio.to_thread(store.delete_items, [item.id])
        except Exception as exc:  # the store itself is broken: say so on the item
            message = f"{message} (and its vectors could not be removed: {describe_error(exc)})"
        try:
            # on a shared catalogue only while this process holds the item (claims.py)
            await self.state.set_status(item.id, ItemStatus.FAILED, error=message, guard=self.claims.guard)
        except KnowledgeError:
            pass  # the item was deleted meanwhile

    # --- figures ----------------------------------------------------------

    def chunks_per_second(self) -> float:
        return self.figures.rate.per_second()

    def stats(self) -> QueueStats:
        return self.figures.stats()

    def remote_payloads(self, payloads: list[dict[str, Any]]) -> None:
        """Another process's catalogue writes (remote.py, on the event loop): stop the tasks
        of what it reset (remote_interrupts.py), and sweep at once for what it added
        (heartbeat.py) instead of at the next idle timer."""
        self.remote_interrupts.feed(payloads)
        if self.heartbeat is not None and offers_work(payloads):
            if offers_containers(payloads):
                self.recovery.sweep_containers_next()
            self.heartbeat.work_offered()

    def _queue_changed(self) -> None:
        self.figures.changed()
        if self.heartbeat is not None:
            self.heartbeat.queue_changed()


__all__ = ["DISK_FULL_PREFIX", "SHUTDOWN_MESSAGE", "KnowledgeRuntimeService", "describe_error"]

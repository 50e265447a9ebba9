"""KnowledgeRuntimeService: executes indexing and retrieval work.

It owns the shared task queue, the per-base write locks, interruption, crash and
shutdown recovery, and publishes every state change on the event bus.

Leaf task:   processing/reading → read + chunk (threads) → processing/embedding →
             embed in batches (progress events) → under the base lock: replace the
             item's chunks in one store transaction, then completed.
Container:   processing/preparing → expand (walk / fetch) → create children →
             enqueue leaves → phase cleared → reconciled from the children.
Any error:   the item's vectors are removed and it is failed with the message.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ktui.core.config import Settings
from ktui.core.data.base_service import KnowledgeBaseService
from ktui.core.data.item_service import ChildSpec, KnowledgeItemService
from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import (
    DiskFullError,
    IngestError,
    KnowledgeError,
    StoreDamagedError,
    StoreError,
    TaskInterrupted,
)
from ktui.core.models import (
    CONTAINER_TYPES,
    Chunk,
    DirectoryItemData,
    FileItemData,
    ItemChanged,
    ItemData,
    ItemPhase,
    ItemsAdded,
    ItemsRemoved,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
    NoteItemData,
    QueueStats,
    SitemapItemData,
    UrlItemData,
)
from ktui.core.runtime.events import EventBus
from ktui.core.runtime.group_commit import GroupCommit
from ktui.core.runtime.parse_pool import ParsePool
from ktui.core.runtime.queue import InterruptReason, InterruptToken, Task, TaskKind, TaskQueue
from ktui.core.runtime.read_ahead import Parsed, ReadAhead
from ktui.core.runtime.recovery import DISK_FULL_PREFIX, SHUTDOWN_MESSAGE, describe_error, recover
from ktui.core.runtime.stats import QueueFigures
from ktui.core.runtime.watcher import FolderWatcher
from ktui.core.storage_faults import LOW_SPACE_BYTES, free_bytes
from ktui.core.store import BaseStore, StoreManager

if TYPE_CHECKING:
    from ktui.core.ingest import Fetcher
    from ktui.core.ingest.ocr.options import OcrOptions

log = logging.getLogger(__name__)

RESERVE_FILENAME = ".space-reserve"  # see KnowledgeRuntimeService._make_reserve
SPACE_PROBE_S = 1.0  # how often a queue paused by a full disk looks for free space again
READ_AHEAD_FILES = 64  # files read (and embedded) ahead: a provider batch, whatever `concurrency` is


def _ocr_options(settings: Settings, base: KnowledgeBase) -> OcrOptions:
    from ktui.core.ingest.ocr.options import ocr_options  # light, but only indexing needs it

    return ocr_options(settings, base)



class KnowledgeRuntimeService:
    def __init__(
        self,
        *,
        settings: Settings,
        bases: KnowledgeBaseService,
        items: KnowledgeItemService,
        stores: StoreManager,
        embeddings: EmbeddingService,
        bus: EventBus,
    ):
        self.settings = settings
        self.bases = bases
        self.items = items
        self.stores = stores
        self.embeddings = embeddings
        self.bus = bus
        self._fetcher: Fetcher | None = None
        self.queue = TaskQueue(self._run_task, concurrency=settings.concurrency)
        self.queue.on_change = self._queue_changed
        self._locks: dict[str, asyncio.Lock] = {}
        self.figures = QueueFigures(self.queue, bus)
        self._closed = False
        self.watcher = FolderWatcher(self.request_refresh)
        self.parse_pool = ParsePool(settings.ingest.parse_workers, settings.ingest.parse_timeout,
                                    settings.ingest.parse_memory_mb)
        self.read_ahead = ReadAhead(
            self.queue, items, self.parse_pool, settings.ingest,
            depth=max(settings.concurrency, READ_AHEAD_FILES), embed_ahead=self._embed_ahead,
            ocr_for=lambda base: _ocr_options(settings, base),
        )
        self._dirty: set[str] = set()  # folders changed again while their refresh was queued/running
        self._chunk_writes: dict[str, GroupCommit[_PendingWrite]] = {}  # base id -> leaves waiting to be stored
        self._phase_writes: GroupCommit[_PhaseWrite] = GroupCommit(self._commit_phases)
        self._embed_progress: dict[str, float] = {}  # leaf id -> its latest embedding progress
        self._refreshing: set[str] = set()  # folders whose refresh request is being set up
        self._space_watch: asyncio.Task[None] | None = None  # runs while a full disk pauses the queue
        self.space_probe_interval = SPACE_PROBE_S

    @property
    def fetcher(self) -> Fetcher:
        """The shared HTTP client for pages and sitemaps, made on first use: a process
        that only searches never imports the fetching machinery."""
        if self._fetcher is None:
            from ktui.core.ingest import Fetcher

            self._fetcher = Fetcher(self.settings.ingest)
        return self._fetcher

    # --- lifecycle --------------------------------------------------------

    async def start(self, *, recover: bool = True) -> None:
        """Start the queue; with `recover` (the long-running holders: TUI, `ktui wait`,
        `ktui serve`), re-queue unfinished work and resume watched folders. One-shot
        commands start without it, so they never replay other work."""
        self.queue.start()
        space = await asyncio.to_thread(free_bytes, self.settings.data_dir)
        if space is None or space > 4 * LOW_SPACE_BYTES:
            await asyncio.to_thread(self._make_reserve)
        try:
            if recover:
                await self.recover()
                await self.resume_watches()
        except DiskFullError as exc:  # reads still work; the work waits for space
            self.pause_for_space(exc)
        await self.remove_stray_store_files()

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
        """Watch every watched folder again, and refresh each once to pick up what changed
        while ktui was closed."""
        usable = {b.id for b in await self.bases.list_all() if b.is_usable}
        for item in await self.items.watched_directories():
            if item.base_id in usable and isinstance(item.data, DirectoryItemData):
                self.watcher.watch(item.base_id, item.id, item.data.path)
                self.request_refresh(item.base_id, item.id)

    def request_refresh(self, base_id: str, item_id: str) -> None:
        """Queue an incremental refresh of a folder item (the watcher's callback)."""
        if self._closed:
            return
        if self.queue.is_active(item_id) or item_id in self._refreshing:
            self._dirty.add(item_id)
            return
        self._refreshing.add(item_id)
        asyncio.get_running_loop().create_task(self._start_refresh(base_id, item_id))

    async def _start_refresh(self, base_id: str, item_id: str) -> None:
        try:
            item = await self.items.get(item_id)
            # no interruption: the refresh leaves queued files alone and restarts running ones it must
            await self._set(item, ItemStatus.PROCESSING)
            self.queue.enqueue(TaskKind.PREPARE_ROOT, base_id, item_id)
        except KnowledgeError:
            self.watcher.unwatch(item_id)  # the item is gone
        except Exception:
            log.exception("could not start the refresh of %s", item_id)
        finally:
            self._refreshing.discard(item_id)

    async def recover(self) -> list[str]:
        """Re-queue what a shutdown interrupted or a crash left `processing` (recovery.py)."""
        return await recover(self)

    async def close(self) -> None:
        """Interrupt running work, mark everything unfinished failed ("interrupted by shutdown")."""
        if self._closed:
            return
        self._closed = True
        if self._space_watch is not None:
            self._space_watch.cancel()
        await self.watcher.close()
        running = list(self.queue._running)
        dropped = await self.queue.close()
        await self.read_ahead.close()
        unfinished = [t.item_id for t in dropped] + running
        if unfinished:
            existing = [i for i in await self.items.get_many(unfinished) if i.status == ItemStatus.PROCESSING]
            if existing:
                try:
                    changed = await self.items.set_status_many(
                        [i.id for i in existing], ItemStatus.FAILED, None, SHUTDOWN_MESSAGE
                    )
                except DiskFullError as exc:  # left `processing`: the next open re-queues them anyway
                    log.warning("could not mark unfinished work at shutdown: %s", exc)
                else:
                    self.bus.publish_all([self._changed(i) for i in changed])
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
        log.warning("rebuilding the store of base %s (%s); old file kept as %s", base.id, reason, moved)

    async def wait_idle(self, base_id: str | None = None) -> None:
        await self.queue.wait_idle(base_id)

    # --- a full disk ------------------------------------------------------

    def pause_for_space(self, exc: DiskFullError) -> None:
        """Stop starting work (the running items fail with the cause, the pending ones wait)
        and look for free space every `space_probe_interval` seconds; once there is some,
        resume and retry what the full disk failed."""
        if self._closed or self.queue.paused is not None:
            return
        log.warning("queue paused: %s", exc)
        self._release_reserve()  # room for recording the failures
        self.queue.pause(str(exc))
        self._space_watch = asyncio.get_running_loop().create_task(self._wait_for_space())

    async def _wait_for_space(self) -> None:
        try:
            while not self._closed:
                await asyncio.sleep(self.space_probe_interval)
                if await asyncio.to_thread(self._space_is_back):
                    break
            if self._closed:
                return
            self.queue.resume()
            await self.recover()  # the items the full disk failed (or left processing) run again
        except asyncio.CancelledError:
            raise
        except DiskFullError as exc:  # filled up again while recovering
            self._space_watch = None
            self.queue.resume()
            self.pause_for_space(exc)
        except Exception:
            log.exception("could not resume after the disk was full")
        finally:
            if self._space_watch is asyncio.current_task():
                self._space_watch = None

    def _space_is_back(self) -> bool:
        """Free space above the floor and the reserve could be written again (statvfs
        alone lies on quota'd and compressed file systems)."""
        space = free_bytes(self.settings.data_dir)
        if space is not None and space < 2 * LOW_SPACE_BYTES:
            return False
        return self._make_reserve()

    @property
    def _reserve_path(self) -> Path:
        return Path(self.settings.data_dir) / RESERVE_FILENAME

    def _make_reserve(self) -> bool:
        """Keep LOW_SPACE_BYTES of the disk in a file of our own. When the disk fills, the
        file is deleted first, so that the failures themselves (status rows, the error
        text) can still be written and nothing is left `processing` without a word."""
        path = self._reserve_path
        try:
            if path.is_file() and path.stat().st_size >= LOW_SPACE_BYTES:
                return True
            with open(path, "wb") as fh:
                fh.write(b"\0" * LOW_SPACE_BYTES)
                fh.flush()
                os.fsync(fh.fileno())
            return True
        except OSError:
            try:
                path.unlink()
            except OSError:
                pass
            return False

    def _release_reserve(self) -> None:
        try:
            self._reserve_path.unlink()
        except OSError:
            pass

    def lock(self, base_id: str) -> asyncio.Lock:
        """The per-base write lock: vector writes and their status writes of one base are
        serialised; other bases never wait on it."""
        return self._locks.setdefault(base_id, asyncio.Lock())

    def forget_base(self, base_id: str) -> None:
        self._locks.pop(base_id, None)
        self._chunk_writes.pop(base_id, None)

    async def store(self, base: KnowledgeBase) -> BaseStore:
        if base.dimensions is None:
            raise StoreError(f"Knowledge base {base.name} has no vector store (unknown dimensions)")
        store = self.stores.get_if_open(base.id, base.dimensions)
        if store is not None:
            return store
        return await asyncio.to_thread(self.stores.get, base.id, base.dimensions)

    # --- tasks ------------------------------------------------------------

    async def _run_task(self, task: Task) -> bool:
        try:
            item, base = await self.items.get_with_base(task.item_id)
        except KnowledgeError:
            return False  # deleted while queued
        if task.kind == TaskKind.PREPARE_ROOT:
            return await self._prepare(task, base, item)
        return await self._index_leaf(task, base, item)

    async def _index_leaf(self, task: Task, base: KnowledgeBase, item: KnowledgeItem) -> bool:
        writes = _BackgroundWrite()
        try:
            return await self._guarded(
                task.token, base, item, self._index_leaf_steps(task.token, base, item, writes),
                verb="indexing", remove_vectors=True, settle=writes.settle,
            )
        finally:
            self._embed_progress.pop(item.id, None)

    async def _index_leaf_steps(
        self, token: InterruptToken, base: KnowledgeBase, item: KnowledgeItem, writes: _BackgroundWrite
    ) -> None:
        # imported here (once, then a dictionary lookup): a process that never indexes
        # never loads the parsers
        from ktui.core.ingest import chunk_documents, read_leaf
        from ktui.core.ingest.pipeline import read_and_chunk_file

        token.check()
        # phase writes go out in the background and are awaited before the next write
        # of this item, so reading overlaps the database round trip
        writes.pending = asyncio.ensure_future(self._phase_writes.submit(_PhaseWrite(item, ItemPhase.READING)))
        recorded = None
        if isinstance(item.data, FileItemData):
            # fingerprint, read, parse and chunk in one worker call, unless it was read ahead
            parsed: Parsed | None = await token.run(self.read_ahead.take(item, base))

            def ocr_progress(done: int, total: int) -> None:
                self.bus.publish(ItemChanged(
                    base.id, item.id, ItemStatus.PROCESSING, ItemPhase.READING, None,
                    done / total if total else None, (done, total),
                ))

            if parsed is None:
                fresh: Parsed = await token.run(self.parse_pool.run(
                    item.source,
                    "read_and_chunk_file",
                    read_and_chunk_file,
                    item.data,
                    item.id,
                    self.settings.ingest,
                    base.chunk_size,
                    base.chunk_overlap,
                    _ocr_options(self.settings, base),
                    on_progress=ocr_progress,
                ))
                parsed = fresh
            chunks, recorded = parsed
            self.read_ahead.schedule(base)  # the worker reads the next files while this one embeds
        else:
            assert isinstance(item.data, (UrlItemData, NoteItemData)), "containers are prepared, not read"
            documents = await token.run(read_leaf(item.type, item.data, self.settings.ingest, self.fetcher))
            token.check()
            chunks = await asyncio.to_thread(
                chunk_documents,
                documents,
                chunk_size=base.chunk_size,
                chunk_overlap=base.chunk_overlap,
                item_id=item.id,
                item_type=item.type,
                source=item.source,
            )
        if not chunks:
            raise IngestError(f"{item.source}: no text content")
        token.check()
        await writes.wait()
        writes.pending = asyncio.ensure_future(
            self._phase_writes.submit(_PhaseWrite(item, ItemPhase.EMBEDDING, progress=0.0))
        )

        def progress(done: int, total: int) -> None:
            token.check()
            fraction = done / total if total else 1.0
            self._embed_progress[item.id] = fraction  # the phase write may publish after this
            self.bus.publish(
                ItemChanged(base.id, item.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING, None, fraction)
            )

        assert base.embedding_model_id is not None, "only a usable base indexes"
        vectors = await token.run(self.embeddings.embed(
            base.embedding_model_id, [c.text for c in chunks], dimensions=base.dimensions, on_progress=progress
        ))
        await writes.wait()
        await self._write_chunks(base, _PendingWrite(item, chunks, vectors, recorded, token))
        self._record_chunks(len(chunks))

    async def _write_chunks(self, base: KnowledgeBase, write: _PendingWrite) -> None:
        """Store a leaf's chunks and mark it completed, as part of a group commit.

        Under the base's write lock, every leaf that finished embedding while the
        previous write ran is written in one store transaction and completed in one
        catalogue transaction: the lock is what serialises a base's writes, so paying
        its cost once per batch rather than once per file is what keeps indexing fast.
        """
        writer = self._chunk_writes.get(base.id)
        if writer is None:
            writer = GroupCommit(lambda batch: self._commit_chunks(base, batch), gate=lambda: self.lock(base.id))
            self._chunk_writes[base.id] = writer
        await writer.submit(write)

    async def _commit_chunks(self, base: KnowledgeBase, batch: list[_PendingWrite]) -> list[Exception | None]:
        """One group of leaves, under the base's write lock (the GroupCommit gate)."""
        # checked under the lock, as the interrupter expects: an interrupted leaf is never written
        refused: list[Exception | None] = [
            TaskInterrupted(f"interrupted by {w.token.reason}") if w.token.interrupted else None for w in batch
        ]
        live = [w for w, r in zip(batch, refused, strict=True) if r is None]
        if live:
            store = await self.store(base)
            await asyncio.to_thread(store.replace_items, [(w.item.id, w.chunks, w.vectors) for w in live])
            self.publish_changes(await self.items.complete_many([(w.item.id, w.recorded) for w in live]))
        return refused

    async def _commit_phases(self, batch: list[_PhaseWrite]) -> None:
        """The phase changes of leaves that moved on together, in one catalogue transaction."""
        changed = await self.items.set_states([(w.item.id, ItemStatus.PROCESSING, w.phase) for w in batch])
        # the latest embedding progress, not 0: a bar must not jump back when the commit lands late
        progress = {w.item.id: self._embed_progress.get(w.item.id, w.progress) for w in batch}
        self.bus.publish_all([self._changed(i, progress.get(i.id)) for i in changed])

    async def _prepare(self, task: Task, base: KnowledgeBase, item: KnowledgeItem) -> bool:
        try:
            return await self._guarded(
                task.token, base, item, self._prepare_steps(task.token, base, item),
                verb="preparing", remove_vectors=False,
            )
        finally:
            if item.id in self._dirty:
                self._dirty.discard(item.id)
                if not self._closed and not task.token.interrupted:
                    self.request_refresh(base.id, item.id)

    async def _prepare_steps(self, token: InterruptToken, base: KnowledgeBase, item: KnowledgeItem) -> None:
        from ktui.core.ingest import expand_sitemap

        token.check()
        await self._set(item, ItemStatus.PROCESSING, ItemPhase.PREPARING)
        if isinstance(item.data, DirectoryItemData):
            await self._prepare_directory(token, base, item)
        elif isinstance(item.data, SitemapItemData):
            urls = await token.run(expand_sitemap(item.data.url, self.settings.ingest, self.fetcher))
            token.check()
            specs = [ChildSpec(ItemType.URL, UrlItemData(url=u, source=u)) for u in urls]
            await self._create_children(base, item.id, specs)
        else:  # pragma: no cover - only containers are prepared
            raise IngestError(f"{item.type} items are not containers")
        await self._set(item, ItemStatus.PROCESSING)  # phase cleared: reconciled from the children

    async def _guarded(
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
            if token.reason == InterruptReason.SHUTDOWN:
                await self._fail(base, item, SHUTDOWN_MESSAGE, remove_vectors=False)
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
            await self._fail(base, item, describe_error(exc), remove_vectors=remove_vectors)
            return False

    async def _prepare_directory(self, token: InterruptToken, base: KnowledgeBase, item: KnowledgeItem) -> None:
        """Walk the folder and bring the children in line with it (all new the first time)."""
        from ktui.core.ingest import expand_directory
        from ktui.core.ingest.pipeline import chunking_signature
        from ktui.core.runtime.refresh import plan_refresh

        existing = await self.items.descendants([item.id])
        assert isinstance(item.data, DirectoryItemData)
        try:
            listing = await expand_directory(
                item.data.path, self.settings.ingest, images=_ocr_options(self.settings, base).enabled
            )
        except IngestError:
            # the folder vanished or holds nothing indexable: none of its old files may stay searchable
            if existing:
                token.check()
                await self._remove_children(base, existing, [c for c in existing if c.group_id == item.id])
            if not os.path.isdir(item.data.path):
                self.watcher.unwatch(item.id)
            raise
        token.check()
        signature = chunking_signature(base.chunk_size, base.chunk_overlap)
        queued = frozenset(c.id for c in existing if self.queue.is_pending(c.id))
        plan = await asyncio.to_thread(plan_refresh, item, listing, existing, signature, queued=queued)
        token.check()
        if plan.delete:
            below = {c.id for c in await self.items.descendants([d.id for d in plan.delete])}
            doomed = [c for c in existing if c.id in below] + plan.delete
            await self._remove_children(base, doomed, plan.delete)
        for child, data in plan.touch:
            await self.items.update_data(child.id, data)
        for parent_id, specs in plan.create.items():
            await self._create_children(base, parent_id, specs)
        if plan.reindex:
            ids = [c.id for c in plan.reindex]
            # a leaf being read right now may have read the old content: start it again
            await self.interrupt_and_wait([i for i in ids if self.queue.is_running(i)], InterruptReason.REINDEX)
            self.publish_changes(await self.items.set_status_many(ids, ItemStatus.PROCESSING))
            self.queue.enqueue_many(TaskKind.INDEX_LEAF, base.id, ids)

    async def _create_children(self, base: KnowledgeBase, parent_id: str, specs: list[ChildSpec]) -> None:
        created = await self.items.create_children(base.id, parent_id, specs)
        by_parent: dict[str | None, list[str]] = {}
        for child in created:
            by_parent.setdefault(child.group_id, []).append(child.id)
        for parent, ids in by_parent.items():
            self.bus.publish(ItemsAdded(base.id, tuple(ids), parent))
        self.queue.enqueue_many(TaskKind.INDEX_LEAF, base.id, [c.id for c in created if c.type not in CONTAINER_TYPES])

    async def _remove_children(
        self, base: KnowledgeBase, doomed: list[KnowledgeItem], tops: list[KnowledgeItem]
    ) -> None:
        """Delete children with their vectors: interrupt, vectors first, then the rows."""
        ids = [c.id for c in doomed]
        await self.interrupt_and_wait(ids, InterruptReason.DELETE)
        await self.delete_vectors(base, [c.id for c in doomed if c.type not in CONTAINER_TYPES])
        changed = await self.items.delete([t.id for t in tops])
        self.bus.publish(ItemsRemoved(base.id, tuple(ids)))
        self.publish_changes(changed)

    async def _fail(
        self, base: KnowledgeBase, item: KnowledgeItem, message: str, *, remove_vectors: bool = True
    ) -> None:
        """Remove what the item wrote and record the failure. Never raises for a vanished item."""
        try:
            if remove_vectors and base.dimensions is not None:
                async with self.lock(base.id):
                    store = await self.store(base)
                    await asyncio.to_thread(store.delete_items, [item.id])
        except Exception as exc:  # the store itself is broken: say so on the item
            message = f"{message} (and its vectors could not be removed: {describe_error(exc)})"
        try:
            await self._set(item, ItemStatus.FAILED, error=message)
        except KnowledgeError:
            pass  # the item was deleted meanwhile

    async def _set(
        self,
        item: KnowledgeItem,
        status: ItemStatus,
        phase: ItemPhase | None = None,
        error: str | None = None,
        *,
        progress: float | None = None,
        data: ItemData | None = None,
    ) -> None:
        changed = await self.items.set_status(item.id, status, phase, error, data=data)
        for changed_item in changed:
            self.bus.publish(self._changed(changed_item, progress if changed_item.id == item.id else None))

    @staticmethod
    def _changed(item: KnowledgeItem, progress: float | None = None) -> ItemChanged:
        return ItemChanged(item.base_id, item.id, item.status, item.phase, item.error, progress)

    def publish_changes(self, items: Iterable[KnowledgeItem]) -> None:
        self.bus.publish_all([self._changed(i) for i in items])

    async def _embed_ahead(self, base: KnowledgeBase, texts: list[str]) -> None:
        """Vectors of a file read ahead, into the cache (see read_ahead.py)."""
        if base.embedding_model_id is not None:
            await self.embeddings.embed_ahead(base.embedding_model_id, texts, dimensions=base.dimensions)

    # --- figures ----------------------------------------------------------

    def _record_chunks(self, n: int) -> None:
        self.figures.record_chunks(n)

    def chunks_per_second(self) -> float:
        return self.figures.rate.per_second()

    def stats(self) -> QueueStats:
        return self.figures.stats()

    def _queue_changed(self) -> None:
        self.figures.changed()



@dataclass(eq=False)
class _PendingWrite:
    """A leaf that finished embedding, waiting for its base's next group commit."""

    item: KnowledgeItem
    chunks: list[Chunk]
    vectors: np.ndarray
    recorded: ItemData | None
    token: InterruptToken


@dataclass(frozen=True)
class _PhaseWrite:
    """A leaf moving to another phase of `processing`, waiting for the next group commit."""

    item: KnowledgeItem
    phase: ItemPhase
    progress: float | None = None


class _BackgroundWrite:
    """A leaf's phase write that runs while the leaf goes on reading or embedding; it
    is settled before the leaf's next write so writes stay in order."""

    def __init__(self) -> None:
        self.pending: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        """Wait for it, raising what it raised (e.g. the item was deleted meanwhile)."""
        pending, self.pending = self.pending, None
        if pending is not None:
            await pending

    async def settle(self) -> None:
        """Wait for it on the way out of a failed task: its own failure no longer matters."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        try:
            await pending
        except asyncio.CancelledError:
            raise
        except Exception:
            pass


__all__ = ["DISK_FULL_PREFIX", "SHUTDOWN_MESSAGE", "KnowledgeRuntimeService", "describe_error"]

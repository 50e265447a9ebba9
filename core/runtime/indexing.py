"""Indexing one leaf: read, chunk, embed, store, complete.

processing/reading → read + chunk (a parse worker, or what read-ahead already read)
→ processing/embedding → embed in batches (a progress event per batch) → under the
base's write lock, the item's chunks replace its old ones in one store transaction
and it is completed. Any error fails the item (the runtime's `guarded`).

The two kinds of write a leaf makes go through group commits
(:mod:`ktui.core.runtime.group_commit`): its phase changes share a catalogue
transaction with the other leaves' that arrive together, and the leaves that finish
embedding together are stored and completed in one transaction each.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ktui.core.catalogue import SyncConn
from ktui.core.config import Settings
from ktui.core.embeddings.profiles import with_window_overflow
from ktui.core.errors import IngestError, TaskInterrupted
from ktui.core.models import (
    Chunk,
    FileItemData,
    ItemData,
    ItemPhase,
    ItemStatus,
    KnowledgeBase,
    KnowledgeItem,
    NoteItemData,
    UrlItemData,
)
from ktui.core.runtime.group_commit import GroupCommit
from ktui.core.runtime.queue import InterruptToken, Task
from ktui.core.runtime.read_ahead import Parsed

if TYPE_CHECKING:
    from ktui.core.ingest.ocr.options import OcrOptions
    from ktui.core.runtime.service import KnowledgeRuntimeService


def ocr_options_for(settings: Settings, base: KnowledgeBase) -> OcrOptions:
    """What OCR a read of this base may do."""
    from ktui.core.ingest.ocr.options import ocr_options  # light, but only indexing needs it

    return ocr_options(settings, base)


class LeafIndexer:
    """Runs `index-leaf` tasks for the runtime and owns their group commits."""

    def __init__(self, runtime: KnowledgeRuntimeService) -> None:
        self.runtime = runtime
        self.chunk_writes: dict[str, GroupCommit[PendingWrite]] = {}  # base id -> leaves waiting to be stored
        self.phase_writes: GroupCommit[PhaseWrite] = GroupCommit(self._commit_phases)
        self._embed_progress: dict[str, float] = {}  # leaf id -> its latest embedding progress
        # with `ingest.pipelining` (on by default; tests/benchmarks/test_bench_speedups.py)
        self.group_phase_writes = runtime.settings.ingest.pipelining

    def forget_base(self, base_id: str) -> None:
        self.chunk_writes.pop(base_id, None)

    async def _write_phase(self, write: PhaseWrite) -> None:
        if self.group_phase_writes:
            await self.phase_writes.submit(write)
        else:
            refused = await self._commit_phases([write])
            if refused and refused[0] is not None:
                raise refused[0]

    async def run(self, task: Task, base: KnowledgeBase, item: KnowledgeItem) -> bool:
        writes = BackgroundWrite()
        try:
            return await self.runtime.guarded(
                task.token, base, item, self._steps(task.token, base, item, writes),
                verb="indexing", remove_vectors=True, settle=writes.settle,
            )
        finally:
            self._embed_progress.pop(item.id, None)

    async def _steps(
        self, token: InterruptToken, base: KnowledgeBase, item: KnowledgeItem, writes: BackgroundWrite
    ) -> None:
        # imported here (once, then a dictionary lookup): a process that never indexes
        # never loads the parsers
        from ktui.core.ingest import chunk_documents, read_leaf
        from ktui.core.ingest.pipeline import read_and_chunk_file

        token.check()
        # phase writes go out in the background and are awaited before the next write
        # of this item, so reading overlaps the database round trip
        writes.pending = asyncio.ensure_future(self._write_phase(PhaseWrite(item, ItemPhase.READING)))
        recorded: ItemData | None = None
        if isinstance(item.data, FileItemData):
            # fingerprint, read, parse and chunk in one worker call, unless it was read ahead
            def ocr_progress(done: int, total: int) -> None:
                self.runtime.state.progress(item, ItemPhase.READING, done / total if total else None, (done, total))

            # a read ahead hands over its OCR progress from here on
            parsed: Parsed | None = await token.run(self.runtime.read_ahead.take(item, base, on_progress=ocr_progress))

            if parsed is None:
                fresh: Parsed = await token.run(self.runtime.parse_pool.run(
                    item.source,
                    "read_and_chunk_file",
                    read_and_chunk_file,
                    item.data,
                    item.id,
                    self.runtime.settings.ingest,
                    base.chunk_size,
                    base.chunk_overlap,
                    ocr_options_for(self.runtime.settings, base),
                    on_progress=ocr_progress,
                ))
                parsed = fresh
            chunks, recorded = parsed
            self.runtime.read_ahead.schedule(base)  # the worker reads the next files while this one embeds
        else:
            assert isinstance(item.data, (UrlItemData, NoteItemData)), "containers are prepared, not read"
            documents = await token.run(read_leaf(item.type, item.data, self.runtime.settings.ingest, self.runtime.fetcher))
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
            self._write_phase(PhaseWrite(item, ItemPhase.EMBEDDING, progress=0.0))
        )

        def progress(done: int, total: int) -> None:
            token.check()
            fraction = done / total if total else 1.0
            self._embed_progress[item.id] = fraction  # the phase write may publish after this
            self.runtime.state.progress(item, ItemPhase.EMBEDDING, fraction)

        assert base.embedding_model_id is not None, "only a usable base indexes"
        window = self.runtime.embeddings.profile(base.embedding_model_id).window_tokens
        recorded = with_window_overflow(recorded, item.data, chunks, window)
        vectors = await token.run(self.runtime.embeddings.embed(
            base.embedding_model_id, [c.text for c in chunks], dimensions=base.dimensions, on_progress=progress
        ))
        await writes.wait()
        await self._write_chunks(base, PendingWrite(item, chunks, vectors, recorded, token))
        self.runtime.figures.record_chunks(len(chunks))

    async def write_phases(self, writes: list[PhaseWrite]) -> dict[str, BaseException]:
        """A batch's phase changes through the phase group commit; what could not be
        written, by item id (e.g. an item deleted meanwhile)."""
        outcomes = await self.phase_writes.submit_many(writes)
        return {w.item.id: o for w, o in zip(writes, outcomes, strict=True) if o is not None}

    async def write_many(self, base: KnowledgeBase, writes: list[PendingWrite]) -> list[BaseException | None]:
        """A batch's chunks through the base's chunk group commit; each one's outcome."""
        return await self._chunk_writer(base).submit_many(writes)

    def _chunk_writer(self, base: KnowledgeBase) -> GroupCommit[PendingWrite]:
        writer = self.chunk_writes.get(base.id)
        if writer is None:
            writer = GroupCommit(lambda batch: self._commit_chunks(base, batch), gate=lambda: self.runtime.lock(base.id))
            self.chunk_writes[base.id] = writer
        return writer

    async def _write_chunks(self, base: KnowledgeBase, write: PendingWrite) -> None:
        """Store a leaf's chunks and mark it completed, as part of a group commit.

        Under the base's write lock, every leaf that finished embedding while the
        previous write ran is written in one store transaction and completed in one
        catalogue transaction: the lock is what serialises a base's writes, so paying
        its cost once per batch rather than once per file is what keeps indexing fast.
        """
        await self._chunk_writer(base).submit(write)

    async def _commit_chunks(self, base: KnowledgeBase, batch: list[PendingWrite]) -> list[Exception | None]:
        """One group of leaves, under the base's write lock (the GroupCommit gate)."""
        # checked under the lock, as the interrupter expects: an interrupted leaf is never written
        refused: list[Exception | None] = [
            TaskInterrupted(f"interrupted by {w.token.reason}") if w.token.interrupted else None for w in batch
        ]
        live = [w for w, r in zip(batch, refused, strict=True) if r is None]
        if live:
            store = await self.runtime.store(base)
            claims = self.runtime.claims
            entries = [(w.item.id, w.chunks, w.vectors) for w in live]
            # shared catalogue: the chunks are written in the completion's transaction, held leaves only
            guard = claims.completing(store, entries) if claims.shared else None
            if guard is None:
                await asyncio.to_thread(store.replace_items, entries)
            done = await self.runtime.state.complete_many([(w.item.id, w.recorded) for w in live], guard=guard)
            if claims.shared:  # a leaf whose claim another process took over is its to finish
                written = {i.id for i in done}
                refused = [r if r is not None or w.item.id in written else TaskInterrupted("claimed by another process")
                           for w, r in zip(batch, refused, strict=True)]
        return refused

    async def _commit_phases(self, batch: list[PhaseWrite]) -> list[Exception | None] | None:
        """The phase changes of leaves that moved on together, in one catalogue transaction.

        On a shared catalogue only for the leaves this process still holds (checked and
        locked in that transaction, like a completion): a leaf another process took over
        or reset is left as that one wrote it, and its task ends quietly here."""
        given = {w.item.id: w.progress for w in batch}
        claims = self.runtime.claims
        allowed: set[str] = set()
        guard = None
        if claims.shared and claims.holding is not None:
            holding = claims.holding

            def guard(conn: SyncConn, ids: list[str]) -> list[str]:
                held = holding(conn, ids)
                allowed.update(held)
                return held

        await self.runtime.state.set_states(
            [(w.item.id, ItemStatus.PROCESSING, w.phase) for w in batch],
            # read once the commit lands: the latest embedding progress, not 0, so a bar
            # does not jump back when the commit lands late
            progress=lambda item_id: self._embed_progress.get(item_id, given.get(item_id)),
            guard=guard,
        )
        if guard is None:
            return None
        return [None if w.item.id in allowed else TaskInterrupted("claimed by another process") for w in batch]

    async def embed_ahead(self, base: KnowledgeBase, texts: list[str]) -> None:
        """Vectors of a file read ahead, into the cache (see read_ahead.py)."""
        if base.embedding_model_id is not None:
            await self.runtime.embeddings.embed_ahead(base.embedding_model_id, texts, dimensions=base.dimensions)


@dataclass(eq=False)
class PendingWrite:
    """A leaf that finished embedding, waiting for its base's next group commit."""

    item: KnowledgeItem
    chunks: list[Chunk]
    vectors: np.ndarray
    recorded: ItemData | None
    token: InterruptToken


@dataclass(frozen=True)
class PhaseWrite:
    """A leaf moving to another phase of `processing`, waiting for the next group commit."""

    item: KnowledgeItem
    phase: ItemPhase
    progress: float | None = None


class BackgroundWrite:
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

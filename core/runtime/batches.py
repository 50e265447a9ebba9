"""Indexing a batch of plain-text files of one base as one unit.

A small Markdown file costs almost nothing to read, chunk or embed; what it cost
one task at a time was the machinery around those steps: two phase writes, a
parse-pool round trip, an embedding call and a share of a group commit, each with
its thread hop and event-loop wake-ups. The queue hands a worker up to 64 pending
leaves of one base at once (queue.py `_take_batch`); the plain-text files among
them go through here with, for the whole batch, one "reading" phase write, one
parse-pool call (`read_and_chunk_files`), one "embedding" phase write, one
embedding call (the provider splits it by its `batch_size`, so requests are full
whatever `concurrency` is) and one submission to the base's chunk group commit
(one store transaction, one `complete_many`). Everything else in the batch
(PDFs, office files, URLs, notes) runs alone, as before.

Each file still ends on its own: a file that cannot be read, is empty or fails to
parse fails alone, with the message of the one-file path; a provider error fails
the batch's files the way it fails one file. When the parse call itself fails (a
crash, a timeout), the files are read again one by one, so a file that kills the
parser fails only itself.

Interruption is per item. A deleted or reindexed item drops out of the batch and
is settled (no longer running for `wait_settled`) as soon as the phase write in
flight has landed, while the others go on; its result is discarded, and the chunk
commit checks its token under the base's lock like any other, so it is never
written. When every item of the batch is interrupted (a shutdown, a base delete),
the shared step in flight is cancelled. Batching is off where the catalogue is
shared (PostgreSQL leases are per item, see claims.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from ktui.core.embeddings.profiles import with_window_overflow
from ktui.core.errors import DiskFullError, IngestError, KnowledgeError, TaskInterrupted
from ktui.core.ingest.kinds import is_plain_text
from ktui.core.models import Chunk, FileItemData, ItemData, ItemPhase, ItemStatus, KnowledgeBase, KnowledgeItem
from ktui.core.runtime.failing import fail_held
from ktui.core.runtime.indexing import PendingWrite, PhaseWrite
from ktui.core.runtime.queue import InterruptReason, InterruptToken, Settle, Task
from ktui.core.runtime.recovery import SHUTDOWN_MESSAGE, describe_error

if TYPE_CHECKING:
    from ktui.core.runtime.service import KnowledgeRuntimeService

log = logging.getLogger(__name__)
T = TypeVar("T")


def batchable(item: KnowledgeItem) -> bool:
    """A leaf that may be indexed in a batch: a plain-text file (no parser library, no OCR)."""
    return isinstance(item.data, FileItemData) and is_plain_text(item.data.path)


@dataclass(eq=False)
class _Entry:
    task: Task
    item: KnowledgeItem
    chunks: list[Chunk] = field(default_factory=list)
    recorded: ItemData | None = None
    writing: bool = False  # handed to the chunk commit: it settles when the commit answers

    @property
    def token(self) -> InterruptToken:
        return self.task.token


class BatchIndexer:
    """Runs a batch of plain-text leaves of one base (see the module docstring)."""

    def __init__(self, runtime: KnowledgeRuntimeService) -> None:
        self.runtime = runtime
        self.batches = 0  # batches run (figures for tests and benchmarks)
        self.files = 0  # files handed to them

    async def run_tasks(self, tasks: list[Task], settle: Settle) -> None:
        """A batch of `index-leaf` tasks of one base (queue.py): its plain-text files as one
        unit, any other leaf alone beside them."""
        runtime = self.runtime
        items = {i.id: i for i in await runtime.items.get_many([t.item_id for t in tasks])}
        for task in tasks:
            if task.item_id not in items:
                settle(task, False)  # deleted while queued
        present = [t for t in tasks if t.item_id in items]
        if not present:
            return
        try:
            base = await runtime.bases.get(present[0].base_id)
        except KnowledgeError:
            for task in present:
                settle(task, False)  # the base was deleted meanwhile
            return
        together = [(t, items[t.item_id]) for t in present if batchable(items[t.item_id]) and not t.token.interrupted]
        alone = [t for t in present if not batchable(items[t.item_id]) or t.token.interrupted]

        if len(together) == 1:
            alone.append(together.pop()[0])

        def drop_waiting(task: Task, _token: InterruptToken) -> None:
            settle(task, None)  # interrupted before its turn: a delete need not wait for it

        for task in alone:
            task.token.listener = partial(drop_waiting, task)

        async def one_at_a_time() -> None:
            """The other leaves, one after another: a worker still runs one of them at a
            time, so the batch does not raise the queue's concurrency."""
            for task in alone:
                task.token.listener = None
                if task.settled:
                    continue
                try:
                    settle(task, await runtime.indexer.run(task, base, items[task.item_id]))
                except TaskInterrupted:
                    settle(task, None)

        jobs: list[Awaitable[None]] = [one_at_a_time()]
        if together:
            jobs.append(self.run(base, together, settle))
        try:
            await asyncio.gather(*jobs)
        finally:
            for task in alone:
                task.token.listener = None

    async def fail_many(
        self, base: KnowledgeBase, items: Sequence[KnowledgeItem], message: str, *, remove_vectors: bool = True
    ) -> None:
        """`fail` for several items of one base with one message: one store transaction,
        one catalogue transaction (a batch's files). On a shared catalogue (where batches
        are off today) as `fail` there: one transaction, only the items still held."""
        runtime = self.runtime
        if not items:
            return
        ids = [i.id for i in items]
        if runtime.claims.shared:
            await fail_held(runtime, base, ids, message, remove_vectors=remove_vectors)
            return
        try:
            if remove_vectors and base.dimensions is not None:
                async with runtime.lock(base.id):
                    store = await runtime.store(base)
                    await asyncio.to_thread(store.delete_items, ids)
        except Exception as exc:  # the store itself is broken: say so on the items
            message = f"{message} (and its vectors could not be removed: {describe_error(exc)})"
        try:
            await runtime.state.set_status_many(ids, ItemStatus.FAILED, error=message)
        except KnowledgeError:  # one of them was deleted meanwhile: the others one by one
            for item_id in ids:
                try:
                    await runtime.state.set_status(item_id, ItemStatus.FAILED, error=message)
                except KnowledgeError:
                    pass

    async def run(self, base: KnowledgeBase, tasks: list[tuple[Task, KnowledgeItem]], settle: Settle) -> None:
        run = _Run(self.runtime, base, [_Entry(t, i) for t, i in tasks], settle)
        self.batches += 1
        self.files += len(tasks)
        try:
            await run.steps()
        except asyncio.CancelledError:
            raise
        except TaskInterrupted:
            pass  # every item was interrupted: `finish` settles them
        except Exception as exc:  # a bug guard: no item of the batch may stay `processing`
            log.exception("a batch of %d files of base %s failed unexpectedly", len(run.entries), base.id)
            await run.fail(run.live(), describe_error(exc))
        finally:
            await run.finish()


class _Run:
    """One batch on its way through the steps."""

    def __init__(self, runtime: KnowledgeRuntimeService, base: KnowledgeBase, entries: list[_Entry],
                 settle: Settle) -> None:
        self.runtime = runtime
        self.base = base
        self.entries = entries
        self._settle = settle
        self._step: asyncio.Future[object] | None = None  # the shared step in flight
        self._phase: asyncio.Future[dict[str, BaseException]] | None = None  # the phase write in flight
        self._spawned: set[asyncio.Task[None]] = set()
        for entry in entries:
            entry.token.listener = partial(self._interrupted, entry)

    # --- the steps --------------------------------------------------------------

    async def steps(self) -> None:
        from ktui.core.ingest.pipeline import read_and_chunk_files

        runtime, base = self.runtime, self.base
        self._write_phase(ItemPhase.READING)
        live = self.live()
        if not live:
            return
        settings = runtime.settings.ingest
        files = [(e.item.data, e.item.id) for e in live]
        try:
            outcomes = await self._shared(runtime.parse_pool.run(
                f"{live[0].item.source} and {len(live) - 1} more files", "read_and_chunk_files",
                read_and_chunk_files, files, settings, base.chunk_size, base.chunk_overlap,
            ))
        except IngestError:  # the parser died or timed out on the batch: one file at a time
            outcomes = [await self._read_one(e) for e in live]
        failed: list[tuple[_Entry, str | BaseException]] = []
        for entry, outcome in zip(live, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                failed.append((entry, describe_error(outcome)))
                continue
            kind, first, second = outcome
            if kind != "ok":
                message = str(first)
                failed.append((entry, message if second else f"Could not read {entry.item.source}: {message}"))
                if not second:
                    log.error("parser failed on %s: %s", entry.item.source, message)
                continue
            assert isinstance(first, list) and isinstance(second, FileItemData)
            entry.chunks, entry.recorded = first, second
            if not entry.chunks:
                failed.append((entry, f"{entry.item.source}: no text content"))
        await self._phase_landed()
        await self.fail_each(failed)

        live = self.live()
        if not live:
            return
        self._write_phase(ItemPhase.EMBEDDING, progress=0.0)
        assert base.embedding_model_id is not None, "only a usable base indexes"
        window = runtime.embeddings.profile(base.embedding_model_id).window_tokens
        for entry in live:
            entry.recorded = with_window_overflow(entry.recorded, entry.item.data, entry.chunks, window)
        texts = [c.text for e in live for c in e.chunks]
        embedded = live
        try:
            vectors = await self._shared(runtime.embeddings.embed(
                base.embedding_model_id, texts, dimensions=base.dimensions))
        except TaskInterrupted:
            raise
        except Exception as exc:  # a provider error fails the batch's files as it fails one
            await self._phase_landed()
            await self.fail(self.live(), describe_error(exc), exc)
            return
        await self._phase_landed()

        still = set(map(id, self.live()))
        writes: list[tuple[_Entry, PendingWrite]] = []
        start = 0
        for entry in embedded:
            n = len(entry.chunks)
            if id(entry) in still:
                entry.writing = True
                writes.append((entry, PendingWrite(entry.item, entry.chunks, vectors[start:start + n],
                                                   entry.recorded, entry.token)))
            start += n
        if not writes:
            return
        outcomes_ = await runtime.indexer.write_many(base, [w for _, w in writes])
        failed = []
        for (entry, write), outcome in zip(writes, outcomes_, strict=True):
            entry.writing = False
            if outcome is None:
                self._settle(entry.task, True)
                runtime.figures.record_chunks(len(write.chunks))
            elif isinstance(outcome, TaskInterrupted) or entry.token.interrupted:
                pass  # settled in finish()
            else:
                failed.append((entry, outcome))
        await self.fail_each(failed)

    async def _read_one(self, entry: _Entry) -> tuple[str, object, object] | BaseException:
        from ktui.core.ingest.pipeline import read_and_chunk_file

        base = self.base
        try:
            chunks, recorded = await self._shared(self.runtime.parse_pool.run(
                entry.item.source, "read_and_chunk_file", read_and_chunk_file,
                entry.item.data, entry.item.id, self.runtime.settings.ingest, base.chunk_size, base.chunk_overlap,
            ))
        except TaskInterrupted:
            raise
        except Exception as exc:
            return exc
        return "ok", chunks, recorded

    # --- the shared step and interruption ------------------------------------------

    def live(self) -> list[_Entry]:
        """The entries still going: neither settled nor interrupted."""
        return [e for e in self.entries if not e.task.settled and not e.token.interrupted]

    async def _shared(self, step: Awaitable[T]) -> T:
        """Await one step shared by the batch; cancelled once every item is interrupted."""
        if not self.live():
            if asyncio.iscoroutine(step):
                step.close()
            raise TaskInterrupted("every item of the batch was interrupted")
        future: asyncio.Future[T] = asyncio.ensure_future(step)
        self._step = future  # type: ignore[assignment]
        try:
            return await future
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not self.live() and (current is None or current.cancelling() == 0):
                raise TaskInterrupted("every item of the batch was interrupted") from None
            raise
        finally:
            self._step = None

    def _interrupted(self, entry: _Entry, _token: InterruptToken) -> None:
        """An item's token was just interrupted (on the event loop)."""
        if entry.task.settled:
            return
        if entry.token.reason != InterruptReason.SHUTDOWN and not entry.writing:
            # a delete or a reindex waits for this item alone: let it go once its phase write landed
            self._spawn(self._settle_dropped(entry))
        if not self.live() and self._step is not None:
            self._step.cancel()

    async def _settle_dropped(self, entry: _Entry) -> None:
        await self._phase_landed(quiet=True)
        if not entry.writing:
            self._settle(entry.task, None)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    # --- writes -------------------------------------------------------------------

    def _write_phase(self, phase: ItemPhase, progress: float | None = None) -> None:
        """The phase change of every live entry, in the background (awaited by `_phase_landed`)."""
        live = self.live()
        if live:
            writes = [PhaseWrite(e.item, phase, progress) for e in live]
            self._phase = asyncio.ensure_future(self.runtime.indexer.write_phases(writes))

    async def _phase_landed(self, *, quiet: bool = False) -> None:
        """Wait for the phase write in flight; an item it could not write fails (unless interrupted)."""
        phase = self._phase
        if phase is None:
            return
        try:
            errors = await asyncio.shield(phase)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug guard: the group commit answers per entry
            errors = {e.item.id: exc for e in self.live()}
        if quiet:
            return
        if self._phase is phase:
            self._phase = None
        await self.fail_each([(e, errors[e.item.id]) for e in self.live() if e.item.id in errors])

    async def fail_each(self, failed: Sequence[tuple[_Entry, str | BaseException]]) -> None:
        """Fail entries, those with the same message together."""
        by_message: dict[str, tuple[list[_Entry], BaseException | None]] = {}
        for entry, why in failed:
            message = why if isinstance(why, str) else describe_error(why)
            by_message.setdefault(message, ([], None if isinstance(why, str) else why))[0].append(entry)
        for message, (entries, exc) in by_message.items():
            await self.fail(entries, message, exc)

    async def fail(self, entries: list[_Entry], message: str, exc: BaseException | None = None) -> None:
        """Fail these entries (vectors removed, status written in one transaction each) and settle them."""
        entries = [e for e in entries if not e.task.settled and not e.token.interrupted]
        if not entries:
            return
        if isinstance(exc, DiskFullError):
            # the queue pauses; as with files run alone, one running item fails with the
            # message and the rest of the batch waits, queued again, for the space to return
            self.runtime.pause_for_space(exc)
            entries, waiting = entries[:1], entries[1:]
            for entry in waiting:
                self._settle(entry.task, None)
                self.runtime.queue.enqueue(entry.task.kind, self.base.id, entry.item.id)
        await self.runtime.batches.fail_many(self.base, [e.item for e in entries], message)
        for entry in entries:
            self._settle(entry.task, False)

    async def finish(self) -> None:
        """Settle what is left: interrupted entries (a shutdown marks them as one item's
        task would), after the last phase write landed."""
        await self._phase_landed(quiet=True)
        for task in list(self._spawned):
            await asyncio.gather(task, return_exceptions=True)
        stopped = [e for e in self.entries if not e.task.settled]
        shutdown = [e.item for e in stopped if e.token.reason == InterruptReason.SHUTDOWN]
        if shutdown and not self.runtime.claims.shared:
            try:
                await self.runtime.batches.fail_many(self.base, shutdown, SHUTDOWN_MESSAGE, remove_vectors=False)
            except KnowledgeError:
                pass
        lost = [e for e in stopped if not e.token.interrupted]  # a bug guard: never left `processing`
        if lost:
            log.error("%d items of a batch ended without an outcome", len(lost))
            await self.fail(lost, "Unexpected error: indexing ended without an outcome")
        for entry in stopped:
            self._settle(entry.task, None)
        for entry in self.entries:
            entry.token.listener = None

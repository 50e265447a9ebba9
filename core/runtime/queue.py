"""One in-memory task queue shared by every base.

* fixed concurrency (workers pull tasks in FIFO order);
* de-duplication by item id: an item pending or running is never queued twice;
* interruption: a pending task is dropped (it never runs), a running one gets its
  token set and stops at its next checkpoint; `wait_settled` waits until none of
  the given items is running any more;
* batches (with a `batch_runner`): a worker that pops an `index-leaf` task takes
  the next pending ones of the same base with it, up to `batch_limit` and never
  more than (pending tasks / concurrency), so a short queue still spreads over the
  workers. The runner settles each task of the batch as it ends (`settle`), so an
  item that drops out early (deleted, reindexed) is no longer running for
  `wait_settled` while the rest of its batch goes on.

The queue knows nothing about what tasks do; the runtime hands it a coroutine
function per task kind.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from ktui.core.errors import TaskInterrupted

log = logging.getLogger(__name__)
T = TypeVar("T")


class TaskKind(StrEnum):
    PREPARE_ROOT = "prepare-root"
    INDEX_LEAF = "index-leaf"


class InterruptReason(StrEnum):
    DELETE = "delete"
    REINDEX = "reindex"
    SHUTDOWN = "shutdown"
    BASE_DELETE = "base-delete"
    TAKEN_OVER = "takeover"  # another process holds the item now (remote_interrupts.py)


@dataclass
class InterruptToken:
    reason: InterruptReason | None = None
    _steps: set[asyncio.Future[Any]] = field(default_factory=set, repr=False)  # long steps running now
    # told once when the token is interrupted (a batch sharing one step between many tokens)
    listener: Callable[[InterruptToken], None] | None = field(default=None, repr=False)

    def interrupt(self, reason: InterruptReason) -> None:
        if self.reason is None:
            self.reason = reason
            for step in self._steps:
                step.cancel()
            if self.listener is not None:
                self.listener(self)

    @property
    def interrupted(self) -> bool:
        return self.reason is not None

    def check(self) -> None:
        """A checkpoint: raise if this task was interrupted."""
        if self.reason is not None:
            raise TaskInterrupted(f"interrupted by {self.reason}")

    async def run(self, step: Awaitable[T]) -> T:
        """Await one long step (a fetch, a parse, an embedding request), stopping it as
        soon as the task is interrupted rather than at the next checkpoint: a page that
        never answers would otherwise hold a delete or a shutdown for the whole fetch
        timeout."""
        if self.reason is not None:
            if asyncio.iscoroutine(step):
                step.close()  # never started: no "was never awaited" warning
            self.check()
        future = asyncio.ensure_future(step)
        self._steps.add(future)
        try:
            return await future
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.reason is not None and (current is None or current.cancelling() == 0):
                raise TaskInterrupted(f"interrupted by {self.reason}") from None  # we stopped it
            raise  # the task itself was cancelled
        finally:
            self._steps.discard(future)


@dataclass
class Task:
    kind: TaskKind
    base_id: str
    item_id: str
    token: InterruptToken = field(default_factory=InterruptToken)
    settled: bool = field(default=False, repr=False)  # no longer running (a batch's tasks settle one by one)


Runner = Callable[[Task], Awaitable[bool]]
"""Runs one task; returns True when the item ended completed, False when it failed."""

Settle = Callable[[Task, "bool | None"], None]
"""Ends one task of a batch: True completed, False failed, None interrupted (not counted)."""

BatchRunner = Callable[[list[Task], Settle], Awaitable[None]]
"""Runs a batch of `index-leaf` tasks of one base, settling each of them."""


class TaskQueue:
    def __init__(self, runner: Runner, concurrency: int = 5, *,
                 batch_runner: BatchRunner | None = None, batch_limit: int = 64):
        self._runner = runner
        self._concurrency = concurrency
        self.batch_runner = batch_runner  # None: every task runs alone
        self.batch_limit = batch_limit
        self._pending: OrderedDict[str, Task] = OrderedDict()  # item id -> task
        self._running: dict[str, Task] = {}
        self._active: Counter[str] = Counter()  # pending + running tasks per base, for O(1) idle checks
        self._wakeup = asyncio.Condition()
        self._changed = asyncio.Condition()  # notified whenever a task finishes or is dropped
        self._workers: list[asyncio.Task[None]] = []
        self._closed = False
        self.paused: str | None = None  # why no new task starts (a full disk), None when running
        self.done = 0
        self.failed = 0
        self.on_change: Callable[[], None] | None = None

    # --- lifecycle --------------------------------------------------------

    def start(self) -> None:
        for n in range(self._concurrency):
            self._workers.append(asyncio.create_task(self._worker(), name=f"ktui-worker-{n}"))

    async def close(self) -> list[Task]:
        """Stop taking work: drop pending tasks (returned), interrupt running ones and
        wait for them to settle."""
        self._closed = True
        dropped = list(self._pending.values())
        self._pending.clear()
        for task in dropped:
            self._forget(task)
        for task in list(self._running.values()):  # an interrupt may settle a task of a batch at once
            task.token.interrupt(InterruptReason.SHUTDOWN)
        await self.wait_settled(list(self._running))
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers.clear()
        return dropped

    def pause(self, reason: str) -> None:
        """Start no new task until `resume` (running tasks finish as they will). Waiters
        of `wait_idle` are released: a paused queue will not become idle by itself."""
        if self.paused is not None or self._closed:
            return
        self.paused = reason
        asyncio.get_running_loop().create_task(self._notify_changed())
        self._emit_change()

    def resume(self) -> None:
        if self.paused is None:
            return
        self.paused = None
        self._notify_workers()
        self._emit_change()

    # --- queueing ---------------------------------------------------------

    def enqueue(self, kind: TaskKind, base_id: str, item_id: str) -> bool:
        """Queue a task unless the item is already pending or running."""
        if self._closed or item_id in self._pending or item_id in self._running:
            return False
        self._pending[item_id] = Task(kind, base_id, item_id)
        self._active[base_id] += 1
        self._notify_workers()
        self._emit_change()
        return True

    def enqueue_many(self, kind: TaskKind, base_id: str, item_ids: Iterable[str]) -> int:
        added = 0
        for item_id in item_ids:
            if self._closed or item_id in self._pending or item_id in self._running:
                continue
            self._pending[item_id] = Task(kind, base_id, item_id)
            self._active[base_id] += 1
            added += 1
        if added:
            self._notify_workers()
            self._emit_change()
        return added

    def interrupt(self, item_ids: Iterable[str], reason: InterruptReason) -> set[str]:
        """Drop pending tasks of these items and flag running ones. Returns the affected ids."""
        affected: set[str] = set()
        for item_id in item_ids:
            dropped = self._pending.pop(item_id, None)
            if dropped is not None:
                self._forget(dropped)
                affected.add(item_id)
            task = self._running.get(item_id)
            if task is not None:
                task.token.interrupt(reason)
                affected.add(item_id)
        if affected:
            asyncio.get_running_loop().create_task(self._notify_changed())
            self._emit_change()
        return affected

    def interrupt_base(self, base_id: str, reason: InterruptReason) -> set[str]:
        ids = [t.item_id for t in (*self._pending.values(), *self._running.values()) if t.base_id == base_id]
        return self.interrupt(ids, reason)

    async def wait_settled(self, item_ids: Iterable[str]) -> None:
        """Wait until none of these items has a running task."""
        ids = set(item_ids)
        async with self._changed:
            await self._changed.wait_for(lambda: not (ids & self._running.keys()))

    async def wait_idle(self, base_id: str | None = None) -> None:
        """Wait until nothing is pending or running (for one base, or at all), or until the
        queue is paused with nothing running (the caller reads `paused` to tell which)."""

        def idle() -> bool:
            if self.paused is not None and not self._running:
                return True
            return self._active[base_id] == 0 if base_id is not None else not self._pending and not self._running

        async with self._changed:
            await self._changed.wait_for(idle)

    def _forget(self, task: Task) -> None:
        self._active[task.base_id] -= 1
        if self._active[task.base_id] <= 0:
            del self._active[task.base_id]

    # --- figures ----------------------------------------------------------

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    @property
    def running_count(self) -> int:
        return len(self._running)

    def active_in(self, base_id: str) -> int:
        """Pending + running tasks of one base (O(1)): a search says its base is being indexed."""
        return self._active.get(base_id, 0)

    def is_active(self, item_id: str) -> bool:
        return item_id in self._pending or item_id in self._running

    def is_pending(self, item_id: str) -> bool:
        return item_id in self._pending

    def is_running(self, item_id: str) -> bool:
        return item_id in self._running

    def next_pending(self, kind: TaskKind, base_id: str, limit: int) -> list[str]:
        """The items of the next `limit` pending tasks of this kind and base, in the order
        they will run (looking at most 4 * limit tasks deep)."""
        found: list[str] = []
        for seen, task in enumerate(self._pending.values()):
            if len(found) >= limit or seen >= 4 * limit:
                break
            if task.kind == kind and task.base_id == base_id:
                found.append(task.item_id)
        return found

    # --- internals --------------------------------------------------------

    def _notify_workers(self) -> None:
        async def notify() -> None:
            async with self._wakeup:
                self._wakeup.notify_all()

        asyncio.get_running_loop().create_task(notify())

    def _emit_change(self) -> None:
        if self.on_change is not None:
            self.on_change()

    async def _notify_changed(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _take_batch(self, first: Task) -> list[Task]:
        """`first` and the pending tasks of its kind and base that run with it (looking at
        most 4 x the batch size deep, so this is O(batch size), never O(queue))."""
        if self.batch_runner is None or first.kind != TaskKind.INDEX_LEAF:
            return [first]
        size = min(self.batch_limit, (len(self._pending) + 1) // max(1, self._concurrency))
        if size <= 1:
            return [first]
        ids: list[str] = []
        for seen, task in enumerate(self._pending.values()):
            if len(ids) >= size - 1 or seen >= 4 * size:
                break
            if task.kind == first.kind and task.base_id == first.base_id:
                ids.append(task.item_id)
        return [first, *(self._pending.pop(i) for i in ids)]

    def _settle(self, task: Task, outcome: bool | None) -> None:
        """One task is no longer running (once; later calls are ignored)."""
        if task.settled:
            return
        task.settled = True
        if outcome is True:
            self.done += 1
        elif outcome is False:
            self.failed += 1
        if self._running.get(task.item_id) is task:  # not a newer task of the same item
            del self._running[task.item_id]
        self._forget(task)
        asyncio.get_running_loop().create_task(self._notify_changed())
        self._emit_change()

    async def _worker(self) -> None:
        while True:
            async with self._wakeup:
                await self._wakeup.wait_for(lambda: (bool(self._pending) and self.paused is None) or self._closed)
                if self._closed and not self._pending:
                    return
                _, first = self._pending.popitem(last=False)
                batch = self._take_batch(first)
                for task in batch:
                    self._running[task.item_id] = task
            self._emit_change()
            if len(batch) > 1:
                await self._run_batch(batch)
                continue
            task = first
            try:
                if await self._runner(task):
                    self.done += 1
                else:
                    self.failed += 1
            except asyncio.CancelledError:
                raise
            except TaskInterrupted:
                pass
            except Exception:  # the runner records failures itself; this is a bug guard
                self.failed += 1
                log.exception("task %s for item %s crashed", task.kind, task.item_id)
            finally:
                task.settled = True
                self._running.pop(task.item_id, None)
                self._forget(task)
                await asyncio.shield(self._notify_changed())
                self._emit_change()

    async def _run_batch(self, batch: list[Task]) -> None:
        assert self.batch_runner is not None
        try:
            await self.batch_runner(batch, self._settle)
        except asyncio.CancelledError:
            raise
        except Exception:  # the runner records failures itself; this is a bug guard
            log.exception("a batch of %d tasks (first item %s) crashed", len(batch), batch[0].item_id)
        finally:
            for task in batch:
                self._settle(task, None)
            await asyncio.shield(self._notify_changed())

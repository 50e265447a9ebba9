"""Group commit: writes that arrive while one is running leave together in the next.

Five indexing tasks finish their steps a few milliseconds apart, and each step
ends with a small database write. One transaction per write means one thread hop
and one commit each, and every write queues behind the others on the single
database connection. Gathering what arrived during the previous commit into one
transaction costs nothing when writes are rare (a lone write goes at once) and
divides the cost by the group size when they are not.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

E = TypeVar("E")

# Commits a group. Returns None when every entry was written, or one slot per entry:
# None (written) or the exception that entry's submitter gets (refused alone).
Commit = Callable[[list[E]], Awaitable[Sequence[BaseException | None] | None]]


@asynccontextmanager
async def _no_gate() -> AsyncIterator[None]:
    yield


@dataclass(eq=False)
class _Slot(Generic[E]):
    entry: E
    future: asyncio.Future[None]


class GroupCommit(Generic[E]):
    """Submit entries; each `submit` returns once its entry is committed (or raises why not).

    `gate` is entered before a group is taken from the queue (e.g. a base's write
    lock): whatever arrives while the gate is held joins the group. When a group's
    commit raises, its entries are committed again one by one, so one bad entry
    fails only its own submitter.
    """

    def __init__(self, commit: Commit[E], *,
                 gate: Callable[[], AbstractAsyncContextManager[object]] | None = None):
        self._commit = commit
        self._gate = gate or _no_gate
        self._queue: list[_Slot[E]] = []
        self._drainer: asyncio.Task[None] | None = None  # a strong reference: the loop keeps only weak ones

    @property
    def waiting(self) -> int:
        """Entries queued for the next group (not the one being committed)."""
        return len(self._queue)

    @property
    def idle(self) -> bool:
        return not self._draining and not self._queue

    @property
    def _draining(self) -> bool:
        return self._drainer is not None and not self._drainer.done()

    async def submit(self, entry: E) -> None:
        slot = _Slot(entry, asyncio.get_running_loop().create_future())
        self._queue.append(slot)
        if not self._draining:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        await slot.future

    async def submit_many(self, entries: Sequence[E]) -> list[BaseException | None]:
        """Submit several entries at once (they leave in the same group); returns each
        one's outcome (None: committed) instead of raising the first failure."""
        loop = asyncio.get_running_loop()
        slots = [_Slot(e, loop.create_future()) for e in entries]
        if not slots:
            return []
        self._queue.extend(slots)
        if not self._draining:
            self._drainer = loop.create_task(self._drain())
        try:
            await asyncio.wait([s.future for s in slots])
        except asyncio.CancelledError:
            for slot in slots:
                slot.future.cancel()  # not yet taken: left out of the group; taken: its outcome is dropped
            raise
        return [None if s.future.cancelled() else s.future.exception() for s in slots]

    async def _drain(self) -> None:
        group: list[_Slot[E]] = []
        try:
            while self._queue:
                async with self._gate():
                    group = [s for s in self._queue if not s.future.done()]  # done: its submitter was cancelled
                    self._queue = []
                    if group:
                        await self._commit_group(group)
        except BaseException as exc:  # a bug guard: no submitter may wait forever
            failure = exc if isinstance(exc, Exception) else asyncio.CancelledError()
            for slot in group + self._queue:
                _settle(slot, failure)
            self._queue = []
            raise

    async def _commit_group(self, group: list[_Slot[E]]) -> None:
        try:
            outcomes = await self._commit([s.entry for s in group])
        except Exception as exc:
            if len(group) == 1:
                _settle(group[0], exc)
                return
            for slot in group:
                if not slot.future.done():  # its submitter may have been cancelled meanwhile
                    await self._commit_group([slot])
            return
        for slot, outcome in zip(group, outcomes or [None] * len(group), strict=True):
            _settle(slot, outcome)


def _settle(slot: _Slot[E], outcome: BaseException | None) -> None:
    if slot.future.done():
        return
    if outcome is None:
        slot.future.set_result(None)
    else:
        slot.future.set_exception(outcome)

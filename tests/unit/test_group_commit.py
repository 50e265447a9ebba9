"""GroupCommit: a lone write goes at once; writes that arrive during a commit share the next."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest

from ktui.core.runtime.group_commit import GroupCommit


class Recorder:
    """A commit function that records its groups and can be told to fail or refuse.

    With `held=True` the first commit stops inside until `release()`: `running` says
    it has started, so a test knows "a commit is running" without timing anything."""

    def __init__(self, held: bool = False):
        self.groups: list[list[str]] = []
        self.bad: set[str] = set()  # any group holding one of these raises
        self.refuse: set[str] = set()  # these are refused alone; the rest of the group is written
        self.running = asyncio.Event()
        self._released = asyncio.Event()
        if not held:
            self._released.set()

    def release(self) -> None:
        self._released.set()

    async def __call__(self, entries: list[str]):
        self.running.set()
        await self._released.wait()
        if self.bad & set(entries):
            raise RuntimeError(f"bad entry in {entries}")
        self.groups.append(list(entries))
        if not self.refuse & set(entries):
            return None
        return [ValueError(f"refused {e}") if e in self.refuse else None for e in entries]


async def test_a_lone_write_is_committed_at_once():
    rec = Recorder()
    writer = GroupCommit(rec)
    await writer.submit("a")
    assert rec.groups == [["a"]] and writer.idle


async def test_writes_arriving_during_a_commit_share_the_next_one():
    rec = Recorder(held=True)
    writer = GroupCommit(rec)
    first = asyncio.ensure_future(writer.submit("first"))
    await rec.running.wait()  # the first commit is running
    later = [asyncio.ensure_future(writer.submit(f"w{i}")) for i in range(4)]
    await asyncio.sleep(0)  # let them queue
    assert writer.waiting == 4
    rec.release()
    await asyncio.gather(first, *later)
    assert rec.groups == [["first"], ["w0", "w1", "w2", "w3"]]
    assert writer.idle


async def test_a_failing_group_is_written_one_by_one_so_only_the_bad_entry_fails():
    rec = Recorder()
    rec.bad = {"bad"}
    writer = GroupCommit(rec, gate=_yielding_gate())
    results = await asyncio.gather(*(writer.submit(e) for e in ("a", "bad", "b")), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], RuntimeError)
    assert rec.groups == [["a"], ["b"]]


async def test_an_entry_refused_alone_fails_its_submitter_and_the_rest_are_written_together():
    rec = Recorder()
    rec.refuse = {"no"}
    writer = GroupCommit(rec, gate=_yielding_gate())
    results = await asyncio.gather(*(writer.submit(e) for e in ("a", "no", "b")), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError) and str(results[1]) == "refused no"
    assert rec.groups == [["a", "no", "b"]]  # one transaction; the commit skipped "no" itself


async def test_a_cancelled_submitter_is_left_out_of_its_group():
    rec = Recorder(held=True)
    writer = GroupCommit(rec)
    first = asyncio.ensure_future(writer.submit("first"))
    await rec.running.wait()  # the first commit is running
    gone = asyncio.ensure_future(writer.submit("gone"))
    kept = asyncio.ensure_future(writer.submit("kept"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)  # the cancellation lands while the first commit still runs
    rec.release()
    await asyncio.gather(first, kept)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert rec.groups == [["first"], ["kept"]]


async def test_writes_that_arrive_while_the_gate_is_held_join_one_group():
    rec = Recorder()
    lock = asyncio.Lock()
    writer = GroupCommit(rec, gate=lambda: lock)
    await lock.acquire()  # as if another writer of the same base held its lock
    pending = [asyncio.ensure_future(writer.submit(f"w{i}")) for i in range(3)]
    for _ in range(3):
        await asyncio.sleep(0)  # every submitter runs up to its wait (no time passes)
    assert writer.waiting == 3 and rec.groups == []
    lock.release()
    await asyncio.gather(*pending)
    assert rec.groups == [["w0", "w1", "w2"]]


def _yielding_gate():
    """A gate that yields to the loop once before it opens: every submit of a gather
    (scheduled before the drainer) has queued by then, so they all join one group."""

    @asynccontextmanager
    async def gate():
        await asyncio.sleep(0)
        yield

    return gate

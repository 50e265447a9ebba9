"""GroupCommit: a lone write goes at once; writes that arrive during a commit share the next."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest

from ktui.core.runtime.group_commit import GroupCommit


class Recorder:
    """A commit function that records its groups and can be told to fail or refuse."""

    def __init__(self, delay: float = 0.01):
        self.groups: list[list[str]] = []
        self.delay = delay
        self.bad: set[str] = set()  # any group holding one of these raises
        self.refuse: set[str] = set()  # these are refused alone; the rest of the group is written

    async def __call__(self, entries: list[str]):
        await asyncio.sleep(self.delay)
        if self.bad & set(entries):
            raise RuntimeError(f"bad entry in {entries}")
        self.groups.append(list(entries))
        if not self.refuse & set(entries):
            return None
        return [ValueError(f"refused {e}") if e in self.refuse else None for e in entries]


async def test_a_lone_write_is_committed_at_once():
    rec = Recorder(delay=0)
    writer = GroupCommit(rec)
    await writer.submit("a")
    assert rec.groups == [["a"]] and writer.idle


async def test_writes_arriving_during_a_commit_share_the_next_one():
    rec = Recorder(delay=0.02)
    writer = GroupCommit(rec)
    first = asyncio.ensure_future(writer.submit("first"))
    await asyncio.sleep(0.005)  # the first commit is running
    await asyncio.gather(first, *(writer.submit(f"w{i}") for i in range(4)))
    assert rec.groups == [["first"], ["w0", "w1", "w2", "w3"]]
    assert writer.idle


async def test_a_failing_group_is_written_one_by_one_so_only_the_bad_entry_fails():
    rec = Recorder(delay=0)
    rec.bad = {"bad"}
    writer = GroupCommit(rec, gate=_held_for(0.01))
    results = await asyncio.gather(*(writer.submit(e) for e in ("a", "bad", "b")), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], RuntimeError)
    assert rec.groups == [["a"], ["b"]]


async def test_an_entry_refused_alone_fails_its_submitter_and_the_rest_are_written_together():
    rec = Recorder(delay=0)
    rec.refuse = {"no"}
    writer = GroupCommit(rec, gate=_held_for(0.01))
    results = await asyncio.gather(*(writer.submit(e) for e in ("a", "no", "b")), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError) and str(results[1]) == "refused no"
    assert rec.groups == [["a", "no", "b"]]  # one transaction; the commit skipped "no" itself


async def test_a_cancelled_submitter_is_left_out_of_its_group():
    rec = Recorder(delay=0.02)
    writer = GroupCommit(rec)
    first = asyncio.ensure_future(writer.submit("first"))
    await asyncio.sleep(0.005)
    gone = asyncio.ensure_future(writer.submit("gone"))
    kept = asyncio.ensure_future(writer.submit("kept"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(first, kept)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert rec.groups == [["first"], ["kept"]]


async def test_writes_that_arrive_while_the_gate_is_held_join_one_group():
    rec = Recorder(delay=0)
    lock = asyncio.Lock()
    writer = GroupCommit(rec, gate=lambda: lock)
    await lock.acquire()  # as if another writer of the same base held its lock
    pending = [asyncio.ensure_future(writer.submit(f"w{i}")) for i in range(3)]
    await asyncio.sleep(0.01)
    assert writer.waiting == 3 and rec.groups == []
    lock.release()
    await asyncio.gather(*pending)
    assert rec.groups == [["w0", "w1", "w2"]]


def _held_for(seconds: float):
    """A gate that takes a moment to enter, so that every submit of a gather joins one group."""

    @asynccontextmanager
    async def gate():
        await asyncio.sleep(seconds)
        yield

    return gate

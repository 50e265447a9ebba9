"""A holder's recovery runs in the background (issue 16): reads answer while it runs,
writes that race it stay correct, close() during it leaves nothing half-done.

Real SQLite, a real embedding server on 127.0.0.1. The unfinished items are made
through the real write path: a holder accepts them and closes at once, so what the
queue had not finished is marked "interrupted by shutdown". Recovery is held at a
chosen batch through the facade's `recovery_gate` hook — no sleeps, no clocks.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from ktui.core.errors import DiskFullError
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus, ItemType
from ktui.core.runtime.preparing import ContainerPreparer
from ktui.core.runtime.recovery import BATCH, SHUTDOWN_MESSAGE, Recovery
from ktui.core.service import KnowledgeService
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import fake_settings, write_files

server = embedding_server_fixture(32, scope="module")

NOTES = 2 * BATCH + 200  # three batches of the first pass
SMALL = 100  # the batch size of the other tests (fewer notes to index, the same number of batches)


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr("ktui.core.runtime.recovery.BATCH", SMALL)


class Gate:
    """The recovery hook: each batch announces itself and waits for a permit."""

    def __init__(self, *, fail_first: BaseException | None = None) -> None:
        self.arrivals: asyncio.Queue[int] = asyncio.Queue()
        self.permits = asyncio.Semaphore(0)
        self.calls = 0
        self.fail_first = fail_first
        self.opened = False

    async def __call__(self) -> None:
        self.calls += 1
        self.arrivals.put_nowait(self.calls)
        if self.fail_first is not None and self.calls == 1:
            raise self.fail_first
        if not self.opened:
            await self.permits.acquire()

    async def reached(self) -> int:
        return await self.arrivals.get()

    def step(self) -> None:
        self.permits.release()

    def open(self) -> None:
        self.opened = True
        for _ in range(1000):
            self.permits.release()


def note(n: int) -> str:
    return f"Recovery note {n} mentions the marker word zz{n}q."


async def all_items(ks: KnowledgeService, base_id: str) -> list:
    out, page = [], 1
    while True:
        got = await ks.list_items(base_id, group_id=ANY_GROUP, page=page, limit=100)
        out += got.items
        if page >= got.pages:
            return out
        page += 1


async def leave_unfinished(data: Path, url: str, *, notes: int = NOTES, folder: Path | None = None,
                           second: int = 0) -> dict:
    """Accept notes (and a folder) in a holder and close at once: what the queue had not
    finished is failed "interrupted by shutdown". Returns {base name: base id}."""
    ks = await KnowledgeService.open(settings=fake_settings(data, url, concurrency=2))
    try:
        base = await ks.create_base("Stuck")
        ids = {"Stuck": base.id}
        await ks.add_items(base.id, [ItemInput("note", {"content": "A finished note about otters."})])
        assert await ks.wait_idle(timeout=30)
        for start in range(0, notes, 100):
            await ks.add_items(base.id, [ItemInput("note", {"content": note(n)}) for n in range(start, start + 100)])
        if folder is not None:
            await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        if second:
            other = await ks.create_base("Other")
            ids["Other"] = other.id
            for start in range(0, second, 100):
                await ks.add_items(other.id, [ItemInput("note", {"content": f"other {n}"})
                                              for n in range(start, min(second, start + 100))])
    finally:
        await ks.close()
    return ids


async def statuses(data: Path, url: str, base_id: str) -> dict[str, tuple[ItemStatus, str | None]]:
    reader = await KnowledgeService.open(settings=fake_settings(data, url), read_only=True)
    try:
        return {i.id: (i.status, i.error) for i in await all_items(reader, base_id)}
    finally:
        await reader.close()


async def test_reads_answer_while_recovery_is_held_and_everything_completes_after(tmp_path, server):
    data = tmp_path / "data"
    ids = await leave_unfinished(data, server.url)
    before = await statuses(data, server.url, ids["Stuck"])
    stuck = [i for i, (s, e) in before.items() if s == ItemStatus.FAILED and e == SHUTDOWN_MESSAGE]
    assert len(stuck) > 2 * BATCH, "the seed should leave most notes unfinished"

    gate = Gate()
    ks = await KnowledgeService.open(settings=fake_settings(data, server.url), recovery_gate=gate)
    try:
        assert ks.recovering  # from the moment open returns
        assert await gate.reached() == 1  # recovery has looked, and waits before its first batch
        # reads answer now, while recovery has re-queued nothing
        assert [b.name for b in (await ks.list_bases()).items] == ["Stuck"]
        assert (await ks.search(ids["Stuck"], "otters", mode="bm25")).results
        assert (await ks.list_items(ids["Stuck"])).total == len(before)
        assert await statuses(data, server.url, ids["Stuck"]) == before  # nothing touched yet
        assert ks.recovering and ks.queue_stats().recovering == len(stuck)
        assert not await ks.wait_recovered(timeout=0)

        gate.step()
        assert await gate.reached() == 2  # the first batch is queued, the others are not
        still = [i for i in await all_items(ks, ids["Stuck"]) if i.id in stuck and i.status == ItemStatus.FAILED]
        assert len(still) == len(stuck) - BATCH
        assert ks.queue_stats().recovering == len(stuck) - BATCH
        assert (await ks.list_bases()).total == 1

        gate.open()
        assert await ks.wait_idle(timeout=120)  # waits for recovery, then for the work it queued
        assert not ks.recovering and ks.queue_stats().recovering is None
        items = await all_items(ks, ids["Stuck"])
        assert len(items) == NOTES + 1 and {i.status for i in items} == {ItemStatus.COMPLETED}
        assert await ks.check_invariants() == []
        last = NOTES - 1
        hits = (await ks.search(ids["Stuck"], f"zz{last}q", mode="bm25")).results
        assert hits and hits[0].page_content == note(last)
    finally:
        await ks.close()


async def test_writes_racing_recovery_stay_correct(tmp_path, server, small_batches):
    folder = write_files(tmp_path / "docs", {f"d{n % 3}/f{n}.md": f"# File {n}\n\nFolder file yy{n}w.\n"
                                             for n in range(30)})
    data = tmp_path / "data"
    ids = await leave_unfinished(data, server.url, notes=3 * SMALL, folder=folder, second=SMALL)
    before = await statuses(data, server.url, ids["Stuck"])
    stuck = [i for i, (s, e) in before.items() if s == ItemStatus.FAILED and e == SHUTDOWN_MESSAGE]

    gate = Gate()
    ks = await KnowledgeService.open(settings=fake_settings(data, server.url), recovery_gate=gate)
    try:
        await gate.reached()
        everything = await all_items(ks, ids["Stuck"])
        roots = {i.id for i in everything if i.group_id is None}
        directory = next(i for i in everything if i.type == ItemType.DIRECTORY)
        notes = sorted((i for i in everything if i.type == ItemType.NOTE and i.id in stuck),
                       key=lambda i: (i.created_at, i.id))
        first, later = notes[:40], notes[-40:]  # in the first batch / the last one
        # before any batch: delete and reindex items recovery is about to handle, and a base
        await ks.delete_items(ids["Stuck"], [i.id for i in first[:10] + later[:10]])
        await ks.reindex_items(ids["Stuck"], [i.id for i in first[10:20] + later[10:20]])
        await ks.reindex_items(ids["Stuck"], [directory.id], force=True)
        await ks.delete_base(ids["Other"])
        assert not list((data / "bases").glob(f"{ids['Other']}.*"))

        # while a batch runs: the writes and the batch exclude each other, in either order
        racing = [asyncio.ensure_future(ks.delete_items(ids["Stuck"], [i.id for i in first[20:30]])),
                  asyncio.ensure_future(ks.reindex_items(ids["Stuck"], [i.id for i in later[20:30]])),
                  asyncio.ensure_future(ks.reindex_items(ids["Stuck"], [directory.id], force=True))]
        gate.step()
        await asyncio.gather(*racing)
        await gate.reached()
        await ks.delete_items(ids["Stuck"], [i.id for i in later[30:40]])

        gate.open()
        assert await ks.wait_idle(timeout=120)
        deleted = {i.id for i in first[:10] + later[:10] + first[20:30] + later[30:40]}
        items = await all_items(ks, ids["Stuck"])
        assert not deleted & {i.id for i in items}
        assert {i.status for i in items} == {ItemStatus.COMPLETED}, \
            sorted({(i.type.value, i.status.value, i.error) for i in items if i.status != ItemStatus.COMPLETED})
        assert {i.id for i in items if i.group_id is None} == roots - deleted
        assert sum(1 for i in items if i.type == ItemType.FILE) == 30  # the folder, rebuilt twice, once over
        assert [b.name for b in (await ks.list_bases()).items] == ["Stuck"]
        assert await ks.check_invariants() == []
        for gone in [first[0], first[25], later[5], later[35]]:
            marker = re.search(r"zz\d+q", gone.data.content).group()
            assert not [h for h in (await ks.search(ids["Stuck"], marker, mode="bm25")).results if h.item_id == gone.id]
        for kept in [first[15], later[25], notes[len(notes) // 2]]:
            marker = re.search(r"zz\d+q", kept.data.content).group()
            assert [h.item_id for h in (await ks.search(ids["Stuck"], marker, mode="bm25")).results][:1] == [kept.id]
        for n in (0, 29):
            hits = (await ks.search(ids["Stuck"], f"yy{n}w", mode="bm25")).results
            assert len([h for h in hits if h.page_content.endswith(f"yy{n}w.")]) == 1
    finally:
        await ks.close()


async def test_close_during_recovery_leaves_nothing_half_done(tmp_path, server, small_batches):
    data = tmp_path / "data"
    ids = await leave_unfinished(data, server.url, notes=3 * SMALL)
    gate = Gate()
    ks = await KnowledgeService.open(settings=fake_settings(data, server.url), recovery_gate=gate)
    await gate.reached()
    gate.step()
    await gate.reached()  # one batch queued, the rest waits
    await ks.close()  # returns: the held pass is stopped, its queued work marked interrupted
    after = await statuses(data, server.url, ids["Stuck"])
    assert {s for s, _ in after.values()} <= {ItemStatus.COMPLETED, ItemStatus.FAILED}
    assert {e for s, e in after.values() if s == ItemStatus.FAILED} == {SHUTDOWN_MESSAGE}

    # closed before the first batch, too
    gate = Gate()
    ks = await KnowledgeService.open(settings=fake_settings(data, server.url), recovery_gate=gate)
    await gate.reached()
    await ks.close()
    assert await statuses(data, server.url, ids["Stuck"]) == after

    async with await KnowledgeService.open(settings=fake_settings(data, server.url)) as ks:
        assert await ks.wait_idle(timeout=120)
        assert {i.status for i in await all_items(ks, ids["Stuck"])} == {ItemStatus.COMPLETED}
        assert await ks.check_invariants() == []


async def test_a_full_disk_during_recovery_pauses_and_space_back_resumes_it(tmp_path, server, small_batches):
    data = tmp_path / "data"
    ids = await leave_unfinished(data, server.url, notes=3 * SMALL)
    before = await statuses(data, server.url, ids["Stuck"])
    gate = Gate(fail_first=DiskFullError(f"no space left on device: {data}"))
    ks = await KnowledgeService.open(settings=fake_settings(data, server.url), recovery_gate=gate)
    probe = asyncio.Event()

    async def probe_sleep(_seconds: float) -> None:
        await probe.wait()  # the space probe runs when the test says so

    ks._runtime.space._sleep = probe_sleep  # noqa: SLF001 - the injectable probe clock
    try:
        assert await gate.reached() == 1
        assert await ks.wait_idle(timeout=30)  # the pass ended in a pause: nothing will run by itself
        assert (ks.queue_stats().paused or "").startswith("no space left on device: ")
        assert (await ks.list_bases()).total == 1  # reads keep working
        assert await statuses(data, server.url, ids["Stuck"]) == before

        probe.set()  # space is back (the probe finds the disk has room): resume, recover again
        gate.open()
        assert await gate.reached() == 2
        assert await ks.wait_idle(timeout=120)
        assert ks.queue_stats().paused is None
        assert {i.status for i in await all_items(ks, ids["Stuck"])} == {ItemStatus.COMPLETED}
    finally:
        await ks.close()


async def test_a_recovery_error_is_reported_and_watched_folders_refresh_once(tmp_path, server, monkeypatch):
    folder = write_files(tmp_path / "watched", {"a.md": "# A\n\nAardvarks at night.\n"})
    data = tmp_path / "data"
    async with await KnowledgeService.open(settings=fake_settings(data, server.url)) as ks:
        base = await ks.create_base("Watched")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
        assert await ks.wait_idle(timeout=30)
    ids = await leave_unfinished(data, server.url, notes=SMALL)
    (folder / "b.md").write_text("# B\n\nBison on the plains.\n")  # changed while closed

    prepared: list[str] = []
    original = ContainerPreparer.run

    async def counting(self, task, base, item):
        prepared.append(item.id)
        return await original(self, task, base, item)

    monkeypatch.setattr(ContainerPreparer, "run", counting)
    gate = Gate(fail_first=RuntimeError("boom"))
    async with await KnowledgeService.open(settings=fake_settings(data, server.url), recovery_gate=gate) as ks:
        assert ks._runtime.watcher.watching(root.id)  # noqa: SLF001 - followed from open
        assert await ks.wait_idle(timeout=60)
        assert ks.queue_stats().recovery_error == "Unexpected error: RuntimeError: boom"
        assert prepared == [root.id]  # one refresh of the watched folder, after recovery
        found = (await ks.search(base.id, "bison", mode="bm25")).results
        assert [r.metadata["source"] for r in found] == [str(folder / "b.md")]
        # nothing was re-queued: the next open's pass does it
        assert any(i.status == ItemStatus.FAILED for i in await all_items(ks, ids["Stuck"]))
    async with await KnowledgeService.open(settings=fake_settings(data, server.url)) as ks:
        assert await ks.wait_idle(timeout=120)
        assert ks.queue_stats().recovery_error is None
        assert {i.status for i in await all_items(ks, ids["Stuck"])} == {ItemStatus.COMPLETED}
        assert prepared.count(root.id) == 2  # once at each open


async def test_delete_reindex_and_delete_base_wait_for_a_running_batch(tmp_path, server, small_batches, monkeypatch):
    data = tmp_path / "data"
    ids = await leave_unfinished(data, server.url, notes=3 * SMALL, second=SMALL)
    before = await statuses(data, server.url, ids["Stuck"])
    inside, release = asyncio.Event(), asyncio.Event()
    original = Recovery._batch

    async def held_batch(self, batch_ids, waiting):
        if not inside.is_set():  # the first batch stops inside the exclusion until released
            inside.set()
            await release.wait()
        return await original(self, batch_ids, waiting)

    monkeypatch.setattr(Recovery, "_batch", held_batch)
    ks = await KnowledgeService.open(settings=fake_settings(data, server.url))
    try:
        await inside.wait()
        everything = sorted(await all_items(ks, ids["Stuck"]), key=lambda i: (i.created_at, i.id))
        notes = [i for i in everything if i.id in before and before[i.id][0] == ItemStatus.FAILED]
        doomed, again = notes[:5] + notes[-5:], notes[5:10] + notes[-10:-5]
        writes = [asyncio.ensure_future(ks.delete_items(ids["Stuck"], [i.id for i in doomed])),
                  asyncio.ensure_future(ks.reindex_items(ids["Stuck"], [i.id for i in again])),
                  asyncio.ensure_future(ks.delete_base(ids["Other"]))]
        for _ in range(1000):  # bounded: until all three wait for the batch
            if ks._runtime.recovery.writes_waiting == 3:  # noqa: SLF001
                break
            await asyncio.sleep(0)
        assert ks._runtime.recovery.writes_waiting == 3  # noqa: SLF001
        assert await statuses(data, server.url, ids["Stuck"]) == before  # none of them started
        assert {b.name for b in (await ks.list_bases()).items} == {"Stuck", "Other"}  # reads answer
        release.set()
        await asyncio.gather(*writes)
        assert await ks.wait_idle(timeout=120)
        items = await all_items(ks, ids["Stuck"])
        assert {i.id for i in items} == set(before) - {i.id for i in doomed}
        assert {i.status for i in items} == {ItemStatus.COMPLETED}
        assert [b.name for b in (await ks.list_bases()).items] == ["Stuck"]
        assert await ks.check_invariants() == []
    finally:
        release.set()
        await ks.close()

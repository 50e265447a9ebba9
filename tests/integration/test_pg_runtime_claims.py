"""Two runtimes on one PostgreSQL catalogue share its queue through work claims
(core/runtime/claims.py over core/store/postgres/leases.py): every item is indexed and
completed once, a runtime that stalls past its leases is taken over and its late
completion writes nothing. Real PostgreSQL, real chunk store, real HTTP embeddings;
lease expiry is driven by a fake clock both runtimes read, and a stall is a gate the
test holds (no test waits on wall time)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("psycopg")

from ktui.core.models import ItemStatus  # noqa: E402
from ktui.core.store.postgres import PgStoreManager  # noqa: E402
from ktui.core.store.postgres.leases import LeaseOwner, Leases  # noqa: E402
from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.pg_runtimes import TTL, FakeClock, make_notes, runtime_on, statuses  # noqa: E402
from tests.support.services import FAKE_MODEL, fake_settings  # noqa: E402

server = embedding_server_fixture(64)


async def test_two_runtimes_share_one_queue_and_index_every_item_once(postgres_server, pg_schema, tmp_path, server):
    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a, \
            runtime_on(url, pg_schema, tmp_path / "b", server.url, "b", clock) as b:
        base_id, ids = await make_notes(a, url, pg_schema, 30)
        a.runtime.enqueue_items(await a.runtime.items.get_many(ids))
        swept = await b.runtime.recover()  # b sweeps what a has queued but not started
        assert swept
        await asyncio.gather(a.runtime.wait_idle(), b.runtime.wait_idle())
        assert set((await statuses(a, ids)).values()) == {ItemStatus.COMPLETED}
        assert a.runtime.queue.done + b.runtime.queue.done == 30  # each completed once
        assert b.runtime.queue.done >= 1
        assert server.texts_embedded == 30  # and embedded once: a claim refused never reads or embeds
        store = PgStoreManager(url, schema=pg_schema).get(base_id, 64)
        assert store.count() == 30 and sorted(store.item_ids()) == sorted(ids)


async def test_a_stalled_runtime_is_taken_over_and_its_late_completion_writes_nothing(
    postgres_server, pg_schema, tmp_path, server
):
    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a, \
            runtime_on(url, pg_schema, tmp_path / "b", server.url, "b", clock) as b:
        base_id, ids = await make_notes(a, url, pg_schema, 6)
        gate, held = asyncio.Event(), asyncio.Event()
        commit = a.runtime.indexer._commit_chunks

        async def stalled(base, batch):  # a's writes wait here: a stalls past its leases
            held.set()
            await gate.wait()
            return await commit(base, batch)

        a.runtime.indexer._commit_chunks = stalled
        a.runtime.enqueue_items(await a.runtime.items.get_many(ids))
        await held.wait()
        while a.runtime.queue.running_count < 2:  # both of a's workers took (and claimed) an item
            await asyncio.sleep(0.01)
        running = list(a.runtime.queue._running)
        await b.runtime.recover()  # the rest: queued by a, not claimed yet
        await b.runtime.wait_idle()
        assert {i for i, s in (await statuses(b, ids)).items() if s != ItemStatus.COMPLETED} == set(running)
        assert await b.runtime.recover() == []  # a's leases are live: nothing to take

        clock.now += TTL + 1  # a has not renewed: its leases expire
        assert sorted(await b.runtime.recover()) == sorted(running)
        await b.runtime.wait_idle()
        assert set((await statuses(b, ids)).values()) == {ItemStatus.COMPLETED}

        store = PgStoreManager(url, schema=pg_schema).get(base_id, 64)
        chunks_by_b = {c.id for c in store.list_chunks(running)}
        gate.set()  # a wakes up and tries to complete what b already did
        await a.runtime.wait_idle()
        assert a.runtime.queue.done == 0 and a.runtime.queue.failed == 0  # refused, not failed
        assert b.runtime.queue.done == 6
        assert set((await statuses(a, ids)).values()) == {ItemStatus.COMPLETED}
        with a.claims._pool.connection() as con:
            assert con.execute("SELECT count(*) FROM item_lease").fetchone()[0] == 0
        assert store.count() == 6
        assert {c.id for c in store.list_chunks(running)} == chunks_by_b  # a's late chunks were never written


async def test_a_closed_machines_unfinished_work_is_resumed_by_another(postgres_server, pg_schema, tmp_path, server):
    """Through the facade: a process that closes mid-work gives its leases back and leaves
    its items `processing` (not failed); another process's recovery sweeps them up."""
    import psycopg
    from psycopg import sql

    from ktui.core.config import StoreSettings
    from ktui.core.models import ItemInput
    from ktui.core.service import KnowledgeService

    def settings(machine: str):
        return fake_settings(tmp_path / machine, server.url).with_(
            store=StoreSettings(url=postgres_server.url, schema=pg_schema))

    one = await KnowledgeService.open(settings=settings("one"))
    try:
        base = await one.create_base("Shared", FAKE_MODEL, None)
        server.faults.delay(60)  # no embedding answers before the close: all of one's work is unfinished
        notes = await one.add_items(base.id, [ItemInput("note", {"content": f"note {k} on leases"}) for k in range(20)])
    finally:
        await one.close()
    with psycopg.connect(postgres_server.url, autocommit=True) as con:
        con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        assert con.execute("SELECT count(*) FROM item_lease").fetchone()[0] == 0  # given back
        left = dict(con.execute("SELECT status, count(*) FROM knowledge_item GROUP BY 1").fetchall())
    assert left == {"processing": 20}  # left for the others, not failed "interrupted by shutdown"
    server.faults.clear()
    two = await KnowledgeService.open(settings=settings("two"))
    try:
        assert await two.wait_idle(timeout=120)
        got = [await two.get_item(n.id) for n in notes]
        assert {i.status for i in got} == {ItemStatus.COMPLETED}
        for n in notes:
            assert len(await two.list_item_chunks(base.id, n.id)) == 1
    finally:
        await two.close()


async def test_an_idle_machine_joins_in_on_work_another_one_queued(postgres_server, pg_schema, tmp_path, server):
    """Through the facade: machine one queues ten notes and is held on its first; machine
    two, idle, sweeps the other nine up by itself (no recovery call) and indexes them;
    each note is embedded and completed once."""
    from ktui.core.config import StoreSettings
    from ktui.core.models import ItemInput
    from ktui.core.service import KnowledgeService

    def settings(machine: str):
        return fake_settings(tmp_path / machine, server.url, concurrency=1).with_(
            store=StoreSettings(url=postgres_server.url, schema=pg_schema))

    one = await KnowledgeService.open(settings=settings("one"))
    two = await KnowledgeService.open(settings=settings("two"))
    try:
        base = await one.create_base("Shared", FAKE_MODEL, None)
        gate = asyncio.Event()
        commit = one._runtime.indexer._commit_chunks

        async def held(b, batch):
            await gate.wait()
            return await commit(b, batch)

        one._runtime.indexer._commit_chunks = held
        before = server.texts_embedded
        notes = await one.add_items(base.id, [ItemInput("note", {"content": f"note {k} for two"}) for k in range(10)])
        deadline = asyncio.get_running_loop().time() + 120  # a guard only: it waits for an event
        while two._runtime.queue.done < 9:
            assert asyncio.get_running_loop().time() < deadline, "machine two never joined in"
            await asyncio.sleep(0.05)
        gate.set()
        assert await one.wait_idle(timeout=60) and await two.wait_idle(timeout=60)
        assert {(await two.get_item(n.id)).status for n in notes} == {ItemStatus.COMPLETED}
        assert one._runtime.queue.done == 1 and two._runtime.queue.done == 9
        assert server.texts_embedded - before == 10
    finally:
        await one.close()
        await two.close()


async def test_a_sweep_never_gives_back_the_claim_of_a_task_that_started_meanwhile(
    postgres_server, pg_schema, tmp_path, server
):
    """The sweep takes an item this runtime has only queued; its task starts while the
    pass is between its sweep and its batches; the pass must not release that claim,
    or the task's completion would be refused and the item left unfinished."""
    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock, concurrency=1) as a:
        base_id, ids = await make_notes(a, url, pg_schema, 2)
        first_held, first_go = asyncio.Event(), asyncio.Event()
        second_running, second_go = asyncio.Event(), asyncio.Event()
        commit = a.runtime.indexer._commit_chunks

        async def held(base, batch):
            if batch[0].item.id == ids[0]:
                first_held.set()
                await first_go.wait()
            elif batch[0].item.id == ids[1]:  # held running until the pass is over (no polling window)
                second_running.set()
                await second_go.wait()
            return await commit(base, batch)

        a.runtime.indexer._commit_chunks = held
        a.runtime.enqueue_items(await a.runtime.items.get_many(ids))  # ids[1] waits in the queue, unclaimed
        await first_held.wait()
        in_pass, go_on = asyncio.Event(), asyncio.Event()

        async def gate() -> None:  # recovery's batch gate: after the sweep, before the batch
            in_pass.set()
            await go_on.wait()

        a.runtime.recovery.gate = gate
        sweeping = asyncio.ensure_future(a.runtime.recover())
        await in_pass.wait()  # the sweep has claimed ids[1]
        first_go.set()  # the worker finishes ids[0] and starts ids[1] under that claim
        await second_running.wait()
        assert a.runtime.queue.is_running(ids[1])
        go_on.set()
        assert await sweeping == []  # skipped: already queued here
        second_go.set()  # ids[1]'s completion: refused if the pass had given its claim back
        await a.runtime.wait_idle()
        assert set((await statuses(a, ids)).values()) == {ItemStatus.COMPLETED}
        assert a.runtime.queue.done == 2


async def test_each_runtime_sweeps_only_what_it_can_start_soon_and_a_dead_ones_items_come_back(
    postgres_server, pg_schema, tmp_path, server
):
    """Fair share: 40 unfinished notes nobody queued (left by a closed process), five more
    leased by a process that died. Each runtime's sweep claims its budget (a round of
    workers and a short read-ahead: heartbeat.claim_budget), not the whole backlog, so the
    second gets as much as the first; neither touches the dead one's five until the clock
    passes their expiry. Every note is embedded and completed once."""
    from ktui.core.runtime.heartbeat import claim_budget

    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a, \
            runtime_on(url, pg_schema, tmp_path / "b", server.url, "b", clock) as b:
        base_id, ids = await make_notes(a, url, pg_schema, 45)
        dead = Leases(LeaseOwner("dead"), ttl=TTL, clock=clock)
        with a.claims._pool.connection() as con:
            dead_items = sorted(dead.claim(con, ids[:5]))
        gate = asyncio.Event()
        for r in (a, b):  # hold both runtimes' writes: nothing completes while they sweep
            commit = r.runtime.indexer._commit_chunks

            async def held(base, batch, commit=commit):
                await gate.wait()
                return await commit(base, batch)

            r.runtime.indexer._commit_chunks = held
        budget = claim_budget(2)
        first, second = await a.runtime.recover(), await b.runtime.recover()
        assert len(first) == len(second) == budget < 40  # not the whole backlog
        assert not set(first) & set(second) and not set(first + second) & set(dead_items)
        assert await a.runtime.recover() == []  # its budget is full
        gate.set()
        while len(done := [i for i, s in (await statuses(a, ids)).items() if s == ItemStatus.COMPLETED]) < 40:
            await asyncio.gather(a.runtime.recover(), b.runtime.recover())  # the next handfuls
            await asyncio.gather(a.runtime.queue.wait_idle(), b.runtime.queue.wait_idle())
        assert sorted(set(ids) - set(done)) == dead_items  # live leases: untouched
        assert await a.runtime.recover() == [] and await b.runtime.recover() == []
        clock.now += TTL + 1  # the dead process's leases expire
        assert sorted(await a.runtime.recover()) == dead_items
        await a.runtime.wait_idle()
        assert set((await statuses(a, ids)).values()) == {ItemStatus.COMPLETED}
        assert a.runtime.queue.done + b.runtime.queue.done == 45 and b.runtime.queue.done >= budget
        assert server.texts_embedded == 45
        assert PgStoreManager(url, schema=pg_schema).get(base_id, 64).count() == 45


async def test_a_second_machine_gets_its_share_of_a_backlog_the_first_one_swept(
    postgres_server, pg_schema, tmp_path, server
):
    """Through the facade, with the real heartbeats: machine one is left 30 unfinished
    notes by a closed process and sweeps; it stalls on its handful. Machine two, opened
    after, takes everything else by itself, a handful at a time as its tasks end (not the
    one second an idle sweep waits). With the old greedy sweep (up to 200 items) one took
    all 30 and two had nothing to do."""
    from ktui.core.config import StoreSettings
    from ktui.core.models import ItemInput
    from ktui.core.runtime.heartbeat import claim_budget
    from ktui.core.service import KnowledgeService

    def settings(machine: str):
        return fake_settings(tmp_path / machine, server.url, concurrency=2).with_(
            store=StoreSettings(url=postgres_server.url, schema=pg_schema))

    zero = await KnowledgeService.open(settings=settings("zero"))
    try:
        base = await zero.create_base("Shared", FAKE_MODEL, None)
        server.faults.delay(60)  # nothing finishes before the close: all 30 are left
        notes = await zero.add_items(base.id, [ItemInput("note", {"content": f"note {k} to share"}) for k in range(30)])
    finally:
        await zero.close()
    server.faults.clear()
    one = await KnowledgeService.open(settings=settings("one"))
    gate = asyncio.Event()
    commit = one._runtime.indexer._commit_chunks

    async def held(b, batch):
        await gate.wait()
        return await commit(b, batch)

    one._runtime.indexer._commit_chunks = held
    queue, budget = one._runtime.queue, claim_budget(2)
    deadline = asyncio.get_running_loop().time() + 120  # a guard only: these wait for events
    while queue.pending_count + queue.running_count < budget:
        assert asyncio.get_running_loop().time() < deadline, "machine one never swept"
        await asyncio.sleep(0.02)
    two = await KnowledgeService.open(settings=settings("two"))
    try:
        while two._runtime.queue.done < 30 - budget:
            assert asyncio.get_running_loop().time() < deadline, "machine two never got its share"
            await asyncio.sleep(0.05)
        assert queue.pending_count + queue.running_count == budget  # one kept its handful, no more
        gate.set()
        assert await one.wait_idle(timeout=60) and await two.wait_idle(timeout=60)
        assert {(await two.get_item(n.id)).status for n in notes} == {ItemStatus.COMPLETED}
        assert one._runtime.queue.done == budget and two._runtime.queue.done == 30 - budget
        assert two._runtime.heartbeat is not None and two._runtime.heartbeat.sweeps >= 2  # handful after handful
    finally:
        await one.close()
        await two.close()



async def test_a_completed_leaf_is_not_given_back_twice_and_leaves_no_lease(postgres_server, pg_schema, tmp_path, server):
    """A leaf's completion deletes its claim in the transaction that completes it, so the
    task does not give it back again afterwards (a round trip a note on every indexer);
    a task that ends otherwise (here: its leaf failed) still does. No lease is left."""
    from tests.support.pg_leases import connect

    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a:
        base_id, ids = await make_notes(a, url, pg_schema, 7)
        given_back: list[str] = []
        release = a.claims.release

        async def counting(item_ids):
            given_back.extend(item_ids)
            return await release(item_ids)

        a.claims.release = counting  # type: ignore[method-assign]
        a.runtime.enqueue_items(await a.runtime.items.get_many(ids[:6]))
        await a.runtime.wait_idle()
        assert set((await statuses(a, ids[:6])).values()) == {ItemStatus.COMPLETED}
        assert given_back == []
        server.faults.fail(status=400, times=20)  # refused outright: the last note fails
        a.runtime.enqueue_items(await a.runtime.items.get_many(ids[6:]))
        await a.runtime.wait_idle()
        server.faults.clear()
        assert (await statuses(a, ids[6:])) == {ids[6]: ItemStatus.FAILED}
        assert given_back == [ids[6]]
        with connect(url, pg_schema) as con:
            assert con.execute("SELECT count(*) FROM item_lease").fetchone()[0] == 0

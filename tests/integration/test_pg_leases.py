"""Item leases on a real PostgreSQL (core/store/postgres/leases.py): claim, expiry,
renewal, sweep, release and "complete only while held" (take_back, as the runtime's
guard does it: tests/support/pg_leases.py `complete`), with a fake clock the test
advances (no test waits on wall time), and no operation committing a caller's transaction."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("psycopg")

from ktui.core.store.postgres.leases import LeaseOwner, Leases, new_owner  # noqa: E402
from tests.support.pg_leases import (  # noqa: E402
    BASE,
    START,
    catalogue,
    complete,
    complete_items,
    completions,
    connect,
    prepare,
)

TTL = 30.0


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def con(postgres_server, pg_schema):
    catalogue(postgres_server.url, pg_schema)
    connection = connect(postgres_server.url, pg_schema)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def owners(clock: FakeClock, n: int = 2) -> list[Leases]:
    return [Leases(LeaseOwner(f"worker-{k}"), ttl=TTL, clock=clock) for k in range(n)]


def status(con, item_id: str) -> tuple[str, int]:
    row = con.execute("SELECT status FROM knowledge_item WHERE id = %s", (item_id,)).fetchone()
    return (row[0], completions(con)[item_id]) if row else ("gone", 0)


def test_a_lease_is_exclusive_until_it_expires_then_anyone_may_take_it(con, clock) -> None:
    ids = prepare(con, 3)
    a, b = owners(clock)
    assert a.claim(con, ids[:2]) == ids[:2]
    assert b.claim(con, ids) == [ids[2]]  # a's two are live
    clock.now += TTL - 0.001
    assert b.claim(con, ids[:2]) == []  # not yet expired
    clock.now += 0.002
    assert b.claim(con, [ids[1], ids[0]]) == [ids[1], ids[0]]  # expired: taken over, in the order asked
    assert {i: h.owner for i, h in b.holders(con, ids).items()} == dict.fromkeys(ids, "worker-1")


def test_a_late_worker_cannot_complete_after_losing_its_lease(con, clock) -> None:
    (item,) = prepare(con, 1)
    late, fresh = owners(clock)
    assert late.claim(con, [item]) == [item]
    clock.now += TTL + 1  # late stalls past its lease; fresh takes the item over
    assert fresh.sweep(con) == [item]
    done = complete(late, con, [item], complete_items)
    assert (done.held, done.lost, done.result) == ([], [item], None)
    assert status(con, item) == ("processing", 0)  # nothing written
    assert complete(fresh, con, [item], complete_items).held == [item]
    assert status(con, item) == ("completed", 1)
    # and the late worker's retry finds nothing to claim: the item is done
    assert late.claim(con, [item]) == [] and late.sweep(con) == []


def test_an_expired_lease_nobody_took_over_still_completes(con, clock) -> None:
    (item,) = prepare(con, 1)
    (a,) = owners(clock, 1)
    a.claim(con, [item])
    clock.now += 10 * TTL
    assert complete(a, con, [item], complete_items).held == [item]
    assert status(con, item) == ("completed", 1)
    assert a.holders(con, [item]) == {}


def test_one_renewal_statement_keeps_all_of_an_owners_leases(con, clock) -> None:
    ids = prepare(con, 50)
    a, b = owners(clock)
    assert a.claim(con, ids[:40]) == ids[:40]
    assert b.claim(con, ids[40:]) == ids[40:]
    clock.now += TTL * 2 / 3
    assert a.renew(con) == 40  # one UPDATE, every lease of a
    clock.now += TTL * 2 / 3  # past the first expiry, within the renewed one
    holders = a.holders(con, ids)
    assert {h.expires_at for i, h in holders.items() if i in ids[:40]} == {START + TTL * 2 / 3 + TTL}
    # b never renewed: its leases expired, so a sweeps them up; a's own are live
    assert sorted(a.sweep(con)) == ids[40:]
    assert b.claim(con, ids) == []
    assert b.sweep(con) == []


def test_the_sweep_takes_unleased_and_expired_processing_items_up_to_its_limit(con, clock) -> None:
    ids = prepare(con, 10)
    con.execute("UPDATE knowledge_item SET status = 'completed' WHERE id = %s", (ids[0],))
    con.execute("UPDATE knowledge_item SET status = 'failed', error = 'interrupted by shutdown' WHERE id = %s", (ids[1],))
    a, b = owners(clock)
    a.claim(con, ids[2:4])
    first = b.sweep(con, limit=3)
    assert len(first) == 3 and set(first) <= set(ids[4:])
    rest = b.sweep(con, limit=100)
    assert sorted(first + rest) == ids[4:]
    assert b.sweep(con) == []
    clock.now += TTL + 1  # a is dead: its two come back, and so do b's own (it did not renew)
    assert sorted(a.sweep(con, limit=100)) == ids[2:]
    assert a.sweep(con, statuses=("failed",)) == [ids[1]]


def test_release_frees_items_at_once_and_a_deleted_item_takes_its_lease_with_it(con, clock) -> None:
    ids = prepare(con, 4)
    a, b = owners(clock)
    a.claim(con, ids)
    assert a.release(con, [ids[0], ids[0]]) == 1
    assert b.claim(con, ids) == [ids[0]]
    con.execute("DELETE FROM knowledge_item WHERE id = %s", (ids[1],))
    assert set(a.holders(con, ids)) == {ids[0], ids[2], ids[3]}
    assert a.release(con) == 2
    assert b.claim(con, ids) == [ids[0], ids[2], ids[3]]
    assert b.claim(con, ["no-such-item"]) == []


def test_completing_a_batch_writes_only_the_items_still_held(con, clock) -> None:
    ids = prepare(con, 4)
    a, b = owners(clock)
    a.claim(con, ids)
    clock.now += TTL + 1
    b.claim(con, ids[:2])  # b takes two over
    a.renew(con)
    done = complete(a, con, ids, complete_items)
    assert (done.held, done.lost, done.result) == (ids[2:], ids[:2], 2)
    assert [status(con, i) for i in ids] == [("processing", 0)] * 2 + [("completed", 1)] * 2


def test_a_failing_write_rolls_back_and_keeps_the_lease(con, clock) -> None:
    (item,) = prepare(con, 1)
    a, b = owners(clock)
    a.claim(con, [item])

    def broken(c, held):
        complete_items(c, held)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        complete(a, con, [item], broken)
    assert status(con, item) == ("processing", 0)
    assert a.holders(con, [item])[item].owner == "worker-0"
    assert b.claim(con, [item]) == []


def test_claims_see_only_claimable_items(con, clock) -> None:
    ids = prepare(con, 2)
    con.execute("UPDATE knowledge_item SET status = 'completed' WHERE id = %s", (ids[0],))
    (a,) = owners(clock, 1)
    assert a.claim(con, ids) == [ids[1]]
    assert a.claim(con, ids, statuses=("completed", "processing")) == ids  # its own lease: renewed
    assert a.claim(con, []) == [] and a.sweep(con, limit=0) == [] and a.release(con, []) == 0


def test_the_default_clock_is_the_database_servers(con) -> None:
    (item,) = prepare(con, 1)
    a = Leases(ttl=TTL)  # no clock: the server's
    assert a.owner.count(":") == 2 and a.owner != new_owner()
    assert a.claim(con, [item]) == [item]
    (server_now,) = con.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    expires = a.holders(con, [item])[item].expires_at
    assert server_now - 5 < expires - TTL <= server_now
    assert Leases(ttl=TTL).claim(con, [item]) == []  # live on the server's clock


def test_a_lock_held_write_orders_itself_before_a_takeover(postgres_server, pg_schema, clock) -> None:
    """The guard for writes outside the completion (an item's chunks): while the old
    owner's transaction holds the lease row, a takeover waits, so the new owner's write
    comes after it, never before."""
    catalogue(postgres_server.url, pg_schema)
    con = connect(postgres_server.url, pg_schema)
    other = connect(postgres_server.url, pg_schema)
    try:
        (item,) = prepare(con, 1)
        a, b = owners(clock)
        a.claim(con, [item])
        clock.now += TTL + 1
        seen: list[str] = []

        def take_over() -> None:
            while not b.sweep(other):  # skipped while a's transaction holds the item
                pass
            seen.append(other.execute("SELECT created_at FROM knowledge_item WHERE id = %s", (item,)).fetchone()[0])

        with con.transaction():
            assert a.lock_held(con, [item]) == [item]
            thief = threading.Thread(target=take_over)
            thief.start()
            thief.join(0.2)  # gives the takeover its chance to jump the lock (it must not)
            con.execute("UPDATE knowledge_item SET created_at = 'written by a' WHERE id = %s", (item,))
        thief.join(30)
        assert seen == ["written by a"]  # the takeover came after a's guarded write
        assert b.holders(con, [item])[item].owner == "worker-1"
    finally:
        con.close()
        other.close()


def test_concurrent_sweepers_take_disjoint_items(postgres_server, pg_schema, clock) -> None:
    catalogue(postgres_server.url, pg_schema)
    setup = connect(postgres_server.url, pg_schema)
    try:
        ids = prepare(setup, 400)
    finally:
        setup.close()
    got: dict[int, list[str]] = {}

    def sweeper(k: int) -> None:
        leases = Leases(LeaseOwner(f"sweeper-{k}"), ttl=TTL, clock=clock)
        with connect(postgres_server.url, pg_schema) as c:
            mine: list[str] = []
            while batch := leases.sweep(c, limit=7):
                mine += batch
            got[k] = mine

    threads = [threading.Thread(target=sweeper, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    taken = [i for mine in got.values() for i in mine]
    assert sorted(taken) == ids  # every item once: none twice, none left


def test_claim_sweep_renew_complete_interleavings_match_the_model(con) -> None:
    """Hypothesis drives three owners through any interleaving of claims, sweeps,
    renewals, releases, completions and clock steps; the database must agree with a
    model of the rules at every step, and no item is ever completed twice."""
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

    ids = prepare(con, 0)
    items = [f"i{n}" for n in range(6)]
    names = ["w0", "w1", "w2"]
    some = st.lists(st.sampled_from(items), max_size=4)

    class Machine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            con.execute("TRUNCATE item_lease, knowledge_item, done CASCADE")
            con.execute("INSERT INTO knowledge_item (id, base_id, type, data, status, created_at, updated_at) "
                        "SELECT i, 'lease-base', 'note', '{}', 'processing', i, i FROM unnest(%s::text[]) i", (items,))
            self.clock = FakeClock()
            self.owners = {n: Leases(LeaseOwner(n), ttl=TTL, clock=self.clock) for n in names}
            self.leases: dict[str, tuple[str, float]] = {}  # item -> (owner, expires)
            self.done: set[str] = set()

        def live(self, item: str) -> bool:
            return item in self.leases and self.leases[item][1] >= self.clock.now

        def take(self, owner: str, taken: list[str]) -> None:
            for item in taken:
                self.leases[item] = (owner, self.clock.now + TTL)

        @rule(owner=st.sampled_from(names), wanted=some)
        def claim(self, owner: str, wanted: list[str]) -> None:
            expect = [i for i in dict.fromkeys(wanted)
                      if i not in self.done and (not self.live(i) or self.leases[i][0] == owner)]
            assert self.owners[owner].claim(con, wanted) == expect
            self.take(owner, expect)

        @rule(owner=st.sampled_from(names), limit=st.integers(1, 4))
        def sweep(self, owner: str, limit: int) -> None:
            candidates = {i for i in items if i not in self.done and not self.live(i)}
            got = self.owners[owner].sweep(con, limit)
            assert len(got) == len(set(got)) == min(limit, len(candidates)) and set(got) <= candidates
            self.take(owner, got)

        @rule(owner=st.sampled_from(names))
        def renew(self, owner: str) -> None:
            mine = [i for i, (o, _) in self.leases.items() if o == owner]
            assert self.owners[owner].renew(con) == len(mine)
            self.take(owner, mine)

        @rule(owner=st.sampled_from(names), wanted=some)
        def release(self, owner: str, wanted: list[str]) -> None:
            mine = [i for i in set(wanted) if i in self.leases and self.leases[i][0] == owner]
            assert self.owners[owner].release(con, wanted) == len(mine)
            for i in mine:
                del self.leases[i]

        @rule(owner=st.sampled_from(names), wanted=some)
        def complete(self, owner: str, wanted: list[str]) -> None:
            held = sorted(i for i in set(wanted) if i in self.leases and self.leases[i][0] == owner)
            done = complete(self.owners[owner], con, wanted, complete_items)
            assert done.held == held and done.result == (len(held) if held else None)
            for i in held:
                del self.leases[i]
                self.done.add(i)

        @rule(seconds=st.sampled_from([1.0, 10.0, TTL, TTL + 1]))
        def advance(self, seconds: float) -> None:
            self.clock.now += seconds

        @invariant()
        def agrees(self) -> None:
            rows = con.execute("SELECT item_id, owner, expires_at FROM item_lease").fetchall()
            assert {r[0]: (r[1], r[2]) for r in rows} == self.leases
            counts = completions(con)
            assert all(counts[i] == (1 if i in self.done else 0) for i in items)  # never twice

    assert ids == []
    run_state_machine_as_test(
        Machine,
        settings=settings(max_examples=40, stateful_step_count=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]),
    )


def test_a_sweep_takes_leaves_or_containers_apart(con, clock) -> None:
    leaves = prepare(con, 3)
    folders = [f"folder-{n}" for n in range(3)]
    con.execute("INSERT INTO knowledge_item (id, base_id, type, data, status, created_at, updated_at) "
                "SELECT i, %s, 'directory', '{}', 'processing', i, i FROM unnest(%s::text[]) i", (BASE, folders))
    ids = folders + leaves
    (a,) = owners(clock, 1)
    assert sorted(a.sweep(con, limit=10, containers=False)) == ids[3:]  # the folders are left alone
    assert sorted(a.sweep(con, limit=2, containers=True)) in ([ids[0], ids[1]], [ids[0], ids[2]], [ids[1], ids[2]])
    assert len(a.sweep(con, limit=10)) == 1  # either kind: the one left


async def test_no_lease_operation_commits_the_catalogue_transaction_it_runs_in(postgres_server, pg_schema) -> None:
    """Every operation may run on the raw connection of a catalogue write transaction
    (pipelined, begun with a plain BEGIN). After a statement whose result was fetched the
    pipeline has not synced, psycopg reads the connection as idle, and a ``transaction()``
    there COMMITs on its own (2b39da2; the removed ``Leases.complete`` did this: its
    completion survived the caller's rollback). Each operation runs after such a fetch,
    then the caller fails: another connection must see nothing of it, before or after."""
    from ktui.core.store.postgres.catalogue import PgDatabase

    url = postgres_server.url
    db = await PgDatabase.open(url, schema=pg_schema)
    peek = connect(url, pg_schema)
    try:
        ids = prepare(peek, 4)
        clock = FakeClock()
        mine, other = (Leases(LeaseOwner(n), ttl=TTL, clock=clock) for n in ("mine", "other"))
        assert mine.claim(peek, ids[:2]) == ids[:2] and other.claim(peek, ids[2:3]) == ids[2:3]
        clock.now += 1

        def state() -> tuple[object, ...]:
            leases = peek.execute("SELECT item_id, owner, expires_at FROM item_lease ORDER BY item_id").fetchall()
            items = peek.execute("SELECT id, status FROM knowledge_item ORDER BY id").fetchall()
            return tuple(leases), tuple(items)

        before = state()
        operations = {
            "claim": lambda c: mine.claim(c, ids),
            "sweep": lambda c: mine.sweep(c),
            "renew": lambda c: mine.renew(c),
            "release": lambda c: mine.release(c, ids[:1]),
            "release all": lambda c: mine.release(c),
            "take_back": lambda c: complete_items(c, mine.take_back(c, ids)),
            "lock_held": lambda c: complete_items(c, mine.lock_held(c, ids)),
            "seize": lambda c: mine.seize(c, ids),
        }
        for name, operation in operations.items():
            seen: list[tuple[object, ...]] = []

            def inside(conn, operation=operation, seen=seen):
                conn.raw.execute("SELECT 1").fetchall()  # a fetched read first: the pipeline unsynced
                operation(conn.raw)
                conn.raw.execute("SELECT 1").fetchall()
                seen.append(state())  # mid-transaction, from another connection
                raise RuntimeError("the caller's write fails after it")

            with pytest.raises(RuntimeError):
                await db.run_in_transaction(inside)
            assert seen == [before], f"{name} committed inside the caller's transaction"
            assert state() == before, f"{name} survived the caller's rollback"
    finally:
        peek.close()
        await db.close()

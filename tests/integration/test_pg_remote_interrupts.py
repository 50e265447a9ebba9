"""A reset in one process stops the task another process runs for the item, and a
process that lost an item's lease writes nothing more for it (core/runtime/
remote_interrupts.py, claims.py). Real PostgreSQL (pgserver), real chunk stores, a real
HTTP embedding server held slow while an item is in flight; lease expiry comes from an
injected clock. Conditions are awaited with a generous deadline (hang guards only)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("psycopg")

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from ktui.core.errors import NotFoundError  # noqa: E402
from ktui.core.models import ItemInput, ItemPhase, ItemStatus  # noqa: E402
from ktui.core.service import KnowledgeService  # noqa: E402
from ktui.core.store.postgres import PgStoreManager  # noqa: E402
from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.pg_runtimes import (  # noqa: E402
    TTL,
    FakeClock,
    make_notes,
    runtime_on,
    shared_service,
    statuses,
    until,
)
from tests.support.services import FAKE_MODEL  # noqa: E402

server = embedding_server_fixture(64)
HELD = 600.0  # seconds the server holds A's request: A only ends before that if it was stopped


def rows(url: str, schema: str, query: str) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return con.execute(query).fetchall()


async def hold_a_in_embedding(server: Any, a: KnowledgeService, start: Any, *, keep: bool = False) -> None:
    """Make the server slow, start A's work, return once A's embedding request is in flight
    (then the server answers everyone else at once again, unless ``keep``: with several
    tasks, a second request sent after the first would be answered at once and its item
    completed before the test's reset; the caller then clears the delay itself)."""
    before = server.request_count
    server.faults.delay(HELD)
    await start()
    await until(lambda: server.request_count > before and a._runtime.queue.running_count > 0,
                "A's embedding request reaching the server")
    if not keep:
        server.faults.clear()  # only the request already in flight stays held


def assert_a_wrote_nothing(a: KnowledgeService) -> None:
    assert a._runtime.queue.running_count == 0 and a._runtime.queue.pending_count == 0
    assert a._runtime.queue.done == 0 and a._runtime.queue.failed == 0  # stopped, not failed


@pytest.fixture
def machines(postgres_server, pg_schema, tmp_path, server):
    """Machine A indexes (it sweeps); machine B only acts (no sweep: A's work stays A's)."""

    def open_machine(name: str, **kw: Any):
        # an interrupted request keeps its HTTP connection until the server answers (the
        # transport cannot abort a blocking read): room for the requests made after it
        return shared_service(postgres_server.url, pg_schema, tmp_path / name, server.url, timeout=HELD * 2,
                              provider_concurrency=4, **kw)

    return open_machine


async def test_a_delete_in_b_stops_as_task_and_leaves_no_chunks(machines, postgres_server, pg_schema, server):
    async with machines("a", concurrency=1) as a, machines("b", recover=False) as b:
        base = await a.create_base("Shared", FAKE_MODEL, None)
        added: list[Any] = []

        async def add() -> None:
            added.extend(await a.add_items(base.id, [ItemInput("note", {"content": "a note B deletes"})]))

        await hold_a_in_embedding(server, a, add)
        await b.delete_items(base.id, [added[0].id])
        await until(lambda: a._runtime.queue.running_count == 0, "A stopping its task")
        assert_a_wrote_nothing(a)
        with pytest.raises(NotFoundError):
            await a.get_item(added[0].id)
        assert PgStoreManager(postgres_server.url, schema=pg_schema).get(base.id, 64).count() == 0
        assert rows(postgres_server.url, pg_schema, "SELECT * FROM item_lease") == []


async def test_deleting_the_folder_in_b_stops_as_task_for_a_file_in_it(
    machines, postgres_server, pg_schema, server, tmp_path
):
    folder = tmp_path / "docs"
    folder.mkdir()
    for k in range(3):
        (folder / f"f{k}.md").write_text(f"# file {k}\n\nsome text about file {k}\n")
    async with machines("a", concurrency=1) as a, machines("b", recover=False) as b:
        base = await a.create_base("Shared", FAKE_MODEL, None)
        added: list[Any] = []

        async def add() -> None:
            added.extend(await a.add_items(base.id, [ItemInput("directory", {"path": str(folder)})]))

        await hold_a_in_embedding(server, a, add)  # A runs one file; the other two wait in its queue
        await b.delete_items(base.id, [added[0].id])
        await until(lambda: a._runtime.queue.running_count == 0 and a._runtime.queue.pending_count == 0,
                    "A stopping its task and dropping the folder's queued files")
        assert a._runtime.queue.failed == 0
        assert rows(postgres_server.url, pg_schema, "SELECT count(*) FROM knowledge_item") == [(0,)]
        assert PgStoreManager(postgres_server.url, schema=pg_schema).get(base.id, 64).count() == 0
        assert rows(postgres_server.url, pg_schema, "SELECT * FROM item_lease") == []


async def test_a_reindex_in_b_stops_as_task_and_the_item_is_indexed_once(machines, postgres_server, pg_schema, server):
    async with machines("a", concurrency=1) as a, machines("b", recover=False) as b:
        base = await a.create_base("Shared", FAKE_MODEL, None)
        added: list[Any] = []

        async def add() -> None:
            added.extend(await a.add_items(base.id, [ItemInput("note", {"content": "a note B reindexes"})]))

        await hold_a_in_embedding(server, a, add)
        note = added[0]
        await b.reindex_items(base.id, [note.id])  # B takes the item over and indexes it itself
        assert await b.wait_idle(timeout=120)
        await until(lambda: a._runtime.queue.running_count == 0, "A stopping its task")
        assert_a_wrote_nothing(a)
        assert b._runtime.queue.done == 1
        item = await b.get_item(note.id)
        assert (item.status, item.phase) == (ItemStatus.COMPLETED, None)
        chunks = await b.list_item_chunks(base.id, note.id)
        assert len(chunks) == 1
        assert PgStoreManager(postgres_server.url, schema=pg_schema).get(base.id, 64).count() == 1
        assert rows(postgres_server.url, pg_schema, "SELECT * FROM item_lease") == []


async def test_deleting_the_base_in_b_while_a_indexes_into_it(machines, postgres_server, pg_schema, server):
    async with machines("a", concurrency=2) as a, machines("b", recover=False) as b:
        base = await a.create_base("Shared", FAKE_MODEL, None)

        async def add() -> None:
            await a.add_items(base.id, [ItemInput("note", {"content": f"note {k} of a doomed base"}) for k in range(6)])

        await hold_a_in_embedding(server, a, add, keep=True)  # A's second task must not finish first
        await b.delete_base(base.id)
        server.faults.clear()
        await until(lambda: a._runtime.queue.running_count == 0 and a._runtime.queue.pending_count == 0,
                    "A stopping its tasks in the deleted base")
        assert_a_wrote_nothing(a)
        assert base.id not in PgStoreManager(postgres_server.url, schema=pg_schema).base_ids()
        assert rows(postgres_server.url, pg_schema,
                    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'chunk%'"
                    ) == [(0,)]  # no chunk table left half-written
        # A goes on working
        other = await a.create_base("Next", FAKE_MODEL, None)
        [note] = await a.add_items(other.id, [ItemInput("note", {"content": "life goes on"})])
        assert await a.wait_idle(timeout=120)
        assert (await a.get_item(note.id)).status == ItemStatus.COMPLETED


async def test_a_process_whose_lease_was_taken_over_writes_no_phase_and_no_completion(
    postgres_server, pg_schema, tmp_path, server
):
    """A stalls with one item's `embedding` phase write and the other item's completion
    not yet sent; its leases expire (the injected clock) and B takes both over and
    completes them. When A wakes up, its phase write and its completion are refused: both
    items stay as B left them (completed, no phase), with B's chunks, and A ends both
    tasks quietly (neither done nor failed)."""
    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a, \
            runtime_on(url, pg_schema, tmp_path / "b", server.url, "b", clock) as b:
        base_id, ids = await make_notes(a, url, pg_schema, 2)
        phase_first, at_phase, at_commit, gate = ids[0], asyncio.Event(), asyncio.Event(), asyncio.Event()
        write_phase, commit = a.runtime.indexer._write_phase, a.runtime.indexer._commit_chunks

        async def stalled_phase(write):
            if write.item.id == phase_first and write.phase == ItemPhase.EMBEDDING:
                at_phase.set()
                await gate.wait()
            return await write_phase(write)

        async def stalled_commit(base, batch):
            at_commit.set()
            await gate.wait()
            return await commit(base, batch)

        a.runtime.indexer._write_phase = stalled_phase
        a.runtime.indexer._commit_chunks = stalled_commit
        a.runtime.enqueue_items(await a.runtime.items.get_many(ids))
        await asyncio.wait_for(asyncio.gather(at_phase.wait(), at_commit.wait()), 120)
        assert await b.runtime.recover() == []  # A's leases are live

        clock.now += TTL + 1  # A has not renewed: its leases expire
        assert sorted(await b.runtime.recover()) == sorted(ids)
        await b.runtime.wait_idle()
        assert b.runtime.queue.done == 2
        store = PgStoreManager(url, schema=pg_schema).get(base_id, 64)
        chunks_by_b = {c.id for c in store.list_chunks(ids)}

        gate.set()
        await until(lambda: a.runtime.queue.running_count == 0, "A ending its tasks")
        assert a.runtime.queue.done == 0 and a.runtime.queue.failed == 0
        got = {i.id: (i.status, i.phase) for i in await a.runtime.items.get_many(ids)}
        assert got == {i: (ItemStatus.COMPLETED, None) for i in ids}  # no `embedding` over B's completion
        assert set((await statuses(b, ids)).values()) == {ItemStatus.COMPLETED}
        assert store.count() == 2 and {c.id for c in store.list_chunks(ids)} == chunks_by_b
        assert rows(url, pg_schema, "SELECT * FROM item_lease") == []

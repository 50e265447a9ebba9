"""What only the PostgreSQL catalogue has (core/store/postgres/catalogue.py), on a real
PostgreSQL (tests/support/postgres.py): several processes opening one fresh schema at
once, the refusal of a newer schema, writers of several connections serialised by the
catalogue lock, a catalogue write and a chunk write in one transaction, a connection the
server hung up on, credentials in errors. The shared contract runs in
test_base_service.py, test_item_service.py, test_data_fuzz.py, test_import_ledger.py
and tests/unit/test_db.py on both backends."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import numpy as np
import psycopg
import pytest

import ktui.core.data.item_writes as item_writes
from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import ValidItem
from ktui.core.errors import ConstraintError, SchemaVersionError, StoreError
from ktui.core.models import Chunk, DirectoryItemData, FileItemData, ItemPhase, ItemStatus, ItemType, NoteItemData
from ktui.core.store.postgres import PgStoreManager
from ktui.core.store.postgres.catalogue import PgDatabase
from ktui.core.store.postgres.catalogue_schema import PG_SCHEMA_VERSION

MODEL = "builtin::wordllama"
D = 8

OPEN_ONE = """
import asyncio, sys
from ktui.core.store.postgres.catalogue import PgDatabase
async def main():
    db = await PgDatabase.open(sys.argv[1], schema=sys.argv[2])
    print(await db.user_version())
    await db.close()
asyncio.run(main())
"""


def _raw(url: str, schema: str) -> psycopg.Connection:
    con = psycopg.connect(url, autocommit=True)
    con.execute(f'SET search_path TO "{schema}", public')
    return con


def _waiting_for_advisory_locks(con: psycopg.Connection) -> int:
    return int(con.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0])


def _wait_until(test, what: str) -> None:
    deadline = time.monotonic() + 60  # only bounds a failure
    while not test():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _lock_key(con: psycopg.Connection, schema: str) -> int:
    return int(con.execute("SELECT hashtext(%s)", (f"ktui catalogue {schema}",)).fetchone()[0])


def test_two_processes_migrating_one_fresh_schema_at_once(postgres_server, pg_schema) -> None:
    """Both wait on the migration lock (held here until both are queued on it), then one
    migrates and the other finds it done: both open, the schema is migrated once."""
    url = postgres_server.url
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (_lock_key(holder, pg_schema),))
        procs = [
            subprocess.Popen([sys.executable, "-c", OPEN_ONE, url, pg_schema], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        try:
            _wait_until(lambda: _waiting_for_advisory_locks(holder) == 2, "both processes wait for the lock")
            holder.execute("SELECT pg_advisory_unlock(%s)", (_lock_key(holder, pg_schema),))
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert [out.strip() for out, _ in outs] == [str(PG_SCHEMA_VERSION)] * 2
    with _raw(url, pg_schema) as con:
        assert con.execute("SELECT version FROM ktui_catalogue_version").fetchall() == [(PG_SCHEMA_VERSION,)]
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (pg_schema,))}
        assert {"knowledge_group", "knowledge_base", "knowledge_item", "base_import"} <= tables


async def test_a_newer_schema_is_refused_and_left_untouched(postgres_server, pg_schema) -> None:
    url = postgres_server.url
    with psycopg.connect(url, autocommit=True) as con:  # a schema a future ktui made: only its version so far
        con.execute(f'CREATE SCHEMA "{pg_schema}"')
        con.execute(f'CREATE TABLE "{pg_schema}".ktui_catalogue_version (one BOOLEAN PRIMARY KEY, version INTEGER)')
        con.execute(f'INSERT INTO "{pg_schema}".ktui_catalogue_version VALUES (true, %s)', (PG_SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaVersionError, match="newer ktui"):
        await PgDatabase.open(url, schema=pg_schema)
    with _raw(url, pg_schema) as con:
        assert con.execute("SELECT to_regclass('knowledge_item')").fetchone()[0] is None  # nothing was created
        assert con.execute("SELECT version FROM ktui_catalogue_version").fetchone()[0] == PG_SCHEMA_VERSION + 1


async def test_an_older_schema_is_migrated_and_reopening_is_a_no_op(postgres_server, pg_schema) -> None:
    db = await PgDatabase.open(postgres_server.url, schema=pg_schema)
    try:
        group = await BaseWrites(db).create_group("kept")
        assert await db.user_version() == PG_SCHEMA_VERSION
    finally:
        await db.close()
    again = await PgDatabase.open(postgres_server.url, schema=pg_schema)
    try:
        assert [g.id for g in await BaseWrites(again).list_groups()] == [group.id]
    finally:
        await again.close()


async def test_writers_on_two_connections_wait_for_the_catalogue_lock(postgres_server, pg_schema) -> None:
    """Two catalogues (two connections, as two processes have) finish the last two files of
    a folder at the same time: each write waits for the other (the lock, held here until
    both are queued on it), so the second sees the first's child completed and the folder
    ends `completed`, not left `processing` by two writers that each saw the other's
    child still running."""
    url = postgres_server.url
    one = await PgDatabase.open(url, schema=pg_schema)
    two = await PgDatabase.open(url, schema=pg_schema)
    try:
        base = await BaseWrites(one).create(name="B", embedding_model_id=MODEL, dimensions=D)
        folder = ValidItem(ItemType.DIRECTORY, DirectoryItemData(path="/d", source="/d"))
        (root,) = await ItemWrites(one).create_roots(base.id, [folder])
        kids = await ItemWrites(one).create_children(
            base.id, root.id, [ChildSpec(ItemType.FILE, FileItemData(path=f"/d/{n}", source=f"/d/{n}")) for n in "ab"]
        )
        await ItemWrites(one).set_status(root.id, ItemStatus.PROCESSING)  # its own work done: waits on children
        with psycopg.connect(url, autocommit=True) as holder:
            key = _lock_key(holder, pg_schema)
            holder.execute("SELECT pg_advisory_lock(%s)", (key,))
            writes = [
                asyncio.create_task(ItemWrites(db).set_status(kid.id, ItemStatus.COMPLETED))
                for db, kid in zip((one, two), kids, strict=True)
            ]
            await asyncio.to_thread(_wait_until, lambda: _waiting_for_advisory_locks(holder) == 2, "both writers wait")
            holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
            await asyncio.gather(*writes)
        assert (await ItemWrites(two).get(root.id)).status == ItemStatus.COMPLETED
        # reads never wait for the lock
        with psycopg.connect(url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (key,))
            assert len(await ItemWrites(two).children(root.id)) == 2
            holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        await one.close()
        await two.close()


def _chunks(n: int) -> tuple[list[Chunk], np.ndarray]:
    rng = np.random.default_rng(n)
    return [Chunk(f"chunk {i} of the otters", {"i": i}) for i in range(n)], rng.standard_normal((n, D)).astype(np.float32)


async def test_an_items_chunks_and_its_completion_commit_in_one_transaction(postgres_server, pg_schema) -> None:
    """The chunk write joins the catalogue's transaction (`conn.raw`): both commit, or
    neither does (here the status write is refused after the chunks were written)."""
    db = await PgDatabase.open(postgres_server.url, schema=pg_schema)
    stores = PgStoreManager(postgres_server.url, schema=pg_schema)
    try:
        base = await BaseWrites(db).create(name="B", embedding_model_id=MODEL, dimensions=D)
        items = ItemWrites(db)
        (note,) = await items.create_roots(base.id, [ValidItem(ItemType.NOTE, NoteItemData(content="x", source="note"))])
        await items.set_status(note.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING)
        store = stores.create(base.id, D)

        def complete(conn):
            chunks, vectors = _chunks(3)
            store.replace_items([(note.id, chunks, vectors)], con=conn.raw)
            return item_writes._write_status(conn, [note.id], ItemStatus.COMPLETED, None, None, None)

        def refused(conn):
            complete(conn)
            conn.execute("UPDATE knowledge_item SET phase = 'embedding' WHERE id = ?", (note.id,))  # completed + phase

        def fails(conn):
            complete(conn)
            raise RuntimeError("boom")

        with pytest.raises(ConstraintError):  # the schema refuses the row after the chunks were written
            await db.run_in_transaction(refused)
        assert store.count() == 0 and (await items.get(note.id)).status == ItemStatus.PROCESSING
        with pytest.raises(RuntimeError):  # the caller's own failure after both writes
            await db.run_in_transaction(fails)
        assert store.count() == 0 and (await items.get(note.id)).status == ItemStatus.PROCESSING
        (done,) = await db.run_in_transaction(complete)
        assert done.status == ItemStatus.COMPLETED
        assert store.count() == 3 and (await items.get(note.id)).status == ItemStatus.COMPLETED
        assert store.check_invariants() == []
        # deleting the item's chunks joins a transaction the same way
        assert await db.run_in_transaction(lambda conn: store.delete_items([note.id], con=conn.raw)) == 3
        assert store.count() == 0
    finally:
        stores.close_all()
        await db.close()


async def test_a_completion_that_reads_first_still_commits_lease_chunks_and_status_together(
    postgres_server, pg_schema
) -> None:
    """The completion guard reads before it writes the chunks (it takes the leases back,
    RETURNING): the chunk write must still join the catalogue's pipelined transaction.
    It once opened a transaction of its own there (psycopg saw no open one: the pipeline
    had not synced since BEGIN), whose COMMIT let the lease go with the chunks while the
    item stayed `processing` until the status write: another process claimed it in
    between and indexed it again. Another connection looks in the middle: nothing of the
    completion is visible until it commits, and a failure after it undoes all of it."""
    from psycopg import sql

    from ktui.core.store.postgres.leases import LeaseOwner, Leases
    from ktui.core.store.postgres.work_claims import PgWorkClaims

    url = postgres_server.url
    db = await PgDatabase.open(url, schema=pg_schema)
    stores = PgStoreManager(url, schema=pg_schema)
    claims = PgWorkClaims(url, pg_schema, leases=Leases(LeaseOwner("me"), clock=lambda: 1_000_000.0))
    try:
        base = await BaseWrites(db).create(name="B", embedding_model_id=MODEL, dimensions=D)
        items = ItemWrites(db)
        (note,) = await items.create_roots(base.id, [ValidItem(ItemType.NOTE, NoteItemData(content="x", source="note"))])
        await items.set_status(note.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING)
        store = stores.create(base.id, D)
        assert await claims.claim([note.id]) == [note.id]
        chunks, vectors = _chunks(3)
        guard = claims.completing(store, [(note.id, chunks, vectors)])
        seen: list[tuple[int, int]] = []

        def complete(conn, then_fail: bool):
            assert guard(conn, [note.id]) == [note.id]
            with psycopg.connect(url, autocommit=True) as peek:  # another process, mid-completion
                peek.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
                leases = peek.execute("SELECT count(*) FROM item_lease").fetchone()[0]
                seen.append((leases, store.count()))
            written = item_writes._write_status(conn, [note.id], ItemStatus.COMPLETED, None, None, None)
            if then_fail:
                raise RuntimeError("boom")
            return written

        with pytest.raises(RuntimeError):
            await db.run_in_transaction(lambda conn: complete(conn, True))
        assert seen.pop() == (1, 0)  # the lease still held, no chunk yet
        assert store.count() == 0 and (await items.get(note.id)).status == ItemStatus.PROCESSING
        with claims._pool.connection() as con:
            assert list(claims.leases.holders(con, [note.id])) == [note.id]  # rolled back: still ours
        (done,) = await db.run_in_transaction(lambda conn: complete(conn, False))
        assert seen.pop() == (1, 0)
        assert done.status == ItemStatus.COMPLETED and store.count() == 3
        with claims._pool.connection() as con:
            assert claims.leases.holders(con, [note.id]) == {}
        assert store.check_invariants() == []
    finally:
        await claims.close()
        stores.close_all()
        await db.close()


async def test_a_connection_the_server_hung_up_on_is_replaced_before_the_next_call(postgres_server, pg_schema) -> None:
    db = await PgDatabase.open(postgres_server.url, schema=pg_schema)
    try:
        bases = BaseWrites(db)
        await bases.create_group("before")
        pid = db._con.info.backend_pid
        with psycopg.connect(postgres_server.url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
            _wait_until(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone(),
                        "the backend ends")
        await bases.create_group("after")  # a write: a new connection, no error
        assert [g.name for g in await bases.list_groups()] == ["after", "before"]
        assert db._con.info.backend_pid != pid
    finally:
        await db.close()


async def test_credentials_never_appear_in_errors(postgres_server) -> None:
    secret = "s3cr3t-pw"
    bad = postgres_server.url.replace("postgres:@", f"nobody:{secret}@")
    with pytest.raises(StoreError) as caught:
        await PgDatabase.open(bad, schema="ktui")
    assert secret not in str(caught.value)
    assert "postgresql://nobody@" in str(caught.value)


async def test_a_childs_parent_check_looks_the_parent_up_by_id_first(postgres_server, pg_schema) -> None:
    """The self-referencing key's check runs once per child inserted: the unique index it
    uses starts with the id (keyed (base_id, id), PostgreSQL planned it through
    idx_item_base_group, a scan of the base's items per child: 94 s for 20,000 files),
    and a generic plan of its lookup uses an index whose first column is the id."""
    db = await PgDatabase.open(postgres_server.url, schema=pg_schema)
    await db.close()
    with _raw(postgres_server.url, pg_schema) as con:
        (first,) = con.execute(
            "SELECT a.attname FROM pg_constraint c JOIN pg_index i ON i.indexrelid = c.conindid "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
            "WHERE c.conname = 'knowledge_item_base_id_group_id_fkey'"
        ).fetchone()
        assert first == "id"
        con.execute("SET plan_cache_mode = force_generic_plan")
        con.execute("PREPARE parent(text, text) AS "
                    "SELECT 1 FROM ONLY knowledge_item x WHERE base_id = $1 AND id = $2 FOR KEY SHARE OF x")
        plan = "\n".join(r[0] for r in con.execute("EXPLAIN EXECUTE parent('b', 'i')"))
        assert "idx_item_base_group" not in plan and "Index Scan" in plan, plan


async def test_a_writer_that_hangs_mid_transaction_does_not_hold_the_others_for_long(postgres_server, pg_schema) -> None:
    """A transaction left waiting between statements (a hung process, a machine off the
    network) is ended by the server after `idle_in_transaction_timeout`: the catalogue lock
    is free for the other processes, the hung one's write is rolled back and fails, and
    its next call works on a new connection."""
    url = postgres_server.url
    hung = await PgDatabase.open(url, schema=pg_schema, idle_in_transaction_timeout=0.2)
    other = await PgDatabase.open(url, schema=pg_schema)
    try:
        pid = hung._con.info.backend_pid
        with pytest.raises(StoreError):
            async with hung.transaction() as conn:
                await conn.execute("INSERT INTO knowledge_group (id, name, created_at, updated_at) "
                                   "VALUES ('g', 'lost', 'a', 'a')")
                # meanwhile another process writes: it waits for the lock, then gets it
                waiting = asyncio.create_task(BaseWrites(other).create_group("other"))
                with psycopg.connect(url, autocommit=True) as admin:
                    await asyncio.to_thread(_wait_until, lambda: admin.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None,
                        "the server ends the idle transaction's session")
                assert (await waiting).name == "other"
                await conn.execute("SELECT 1")  # the hung writer's connection is gone
        assert [g.name for g in await BaseWrites(hung).list_groups()] == ["other"]  # a new connection
    finally:
        await hung.close()
        await other.close()


async def test_a_big_folder_is_inserted_in_multi_row_statements(postgres_server, pg_schema, monkeypatch) -> None:
    """executemany of a plain INSERT goes out as multi-row VALUES (here 3 statements of at
    most 100 rows: MAX_BOUND lowered), every row written once, in order, its rules checked."""
    import ktui.core.store.postgres.catalogue as catalogue

    monkeypatch.setattr(catalogue, "MAX_BOUND", 1000)  # 100 rows of 10 columns per statement
    db = await PgDatabase.open(postgres_server.url, schema=pg_schema)
    try:
        base = await BaseWrites(db).create(name="B", embedding_model_id=MODEL, dimensions=D)
        items = ItemWrites(db)
        (root,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/d", "/d"))])
        specs = [ChildSpec(ItemType.FILE, FileItemData(f"/d/{n}", f"/d/{n}")) for n in range(250)]
        kids = await items.create_children(base.id, root.id, specs)
        assert [k.data.path for k in kids] == [f"/d/{n}" for n in range(250)]
        assert [c.id for c in await items.children(root.id)] == [k.id for k in kids]
        page = await items.unfinished_page(ItemStatus.PROCESSING, 0, 300)
        assert [p[1] for p in page] == [root.id, *(k.id for k in kids)]  # rowids in insertion order
        bad = [(f"x{n}", base.id, root.id, "file", "{not json" if n == 150 else "{}", "idle", None, None, "t", "t")
               for n in range(200)]
        with pytest.raises(ConstraintError):
            await db.run_in_transaction(lambda conn: conn.executemany(
                "INSERT INTO knowledge_item (id, base_id, group_id, type, data, status, phase, error, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", bad))
        assert len(await items.children(root.id)) == 250  # the first 100 rolled back with the rest
    finally:
        await db.close()

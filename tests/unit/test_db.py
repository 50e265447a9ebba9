"""core.db: pragmas, numbered migrations through PRAGMA user_version, and the schema's
own rules (CHECK constraints, triggers, foreign keys) exercised with raw SQL, so the
database refuses bad rows even when a caller bypasses the services."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from types import SimpleNamespace

import pytest

import ktui.core.db as dbmod
import ktui.core.ids as idsmod
from ktui.core.db import DB_FILENAME, Database
from ktui.core.db_schema import MIGRATIONS, SCHEMA_VERSION, split_script
from ktui.core.errors import SchemaVersionError, StoreError
from ktui.core.ids import new_id, utc_now

NOW = "2026-01-01T00:00:00.000000Z"


@pytest.fixture(params=["sqlite", "postgres"])
async def raw(request, tmp_path):
    """A plain connection in autocommit mode on a freshly migrated catalogue: sqlite3 with
    foreign keys on, or psycopg on a fresh PostgreSQL schema (PgDatabase's migrations;
    `?` placeholders translated), so every rule below is checked on both engines."""
    if request.param == "postgres":
        from ktui.core.store.postgres.catalogue import PgDatabase, PgSyncConn
        from ktui.core.store.postgres.connection import Connections

        server, schema = request.getfixturevalue("postgres_server"), request.getfixturevalue("pg_schema")
        await (await PgDatabase.open(server.url, schema=schema)).close()
        con = Connections(server.url, schema).connect()
        yield PgSyncConn(con)
        con.close()
        return
    database = await Database.open(tmp_path / "data")
    await database.close()
    conn = sqlite3.connect(tmp_path / "data" / DB_FILENAME, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    yield conn
    conn.close()


def _integrity_errors() -> tuple[type[Exception], ...]:
    try:
        import psycopg
    except ImportError:
        return (sqlite3.IntegrityError,)
    return (sqlite3.IntegrityError, psycopg.errors.IntegrityError)


INTEGRITY = _integrity_errors()  # a refused row, on either engine


# --- connection and migrations ---------------------------------------------


async def test_pragmas_are_on(db):
    assert (await db.fetchone("PRAGMA journal_mode"))[0] == "wal"
    assert (await db.fetchone("PRAGMA foreign_keys"))[0] == 1
    assert (await db.fetchone("PRAGMA busy_timeout"))[0] == dbmod.BUSY_TIMEOUT_MS >= 1000


async def test_fresh_database_is_migrated_to_latest(tmp_path):
    database = await Database.open(tmp_path / "new" / "nested")  # creates the directories
    try:
        assert await database.user_version() == SCHEMA_VERSION == len(MIGRATIONS)
        names = {r[0] for r in await database.fetchall("SELECT name FROM sqlite_master")}
        assert {"knowledge_group", "knowledge_base", "knowledge_item"} <= names
        assert {"item_owner_is_container_insert", "item_owner_is_container_update", "item_type_is_immutable"} <= names
    finally:
        await database.close()


async def test_reopen_is_a_no_op(tmp_path):
    database = await Database.open(tmp_path)
    async with database.transaction() as conn:
        await conn.execute(
            "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g', 'kept', ?, ?)", (NOW, NOW)
        )
    schema = await database.fetchall("SELECT type, name, sql FROM sqlite_master ORDER BY name")
    await database.close()

    again = await Database.open(tmp_path)
    try:
        assert await again.user_version() == SCHEMA_VERSION
        assert [tuple(r) for r in await again.fetchall("SELECT type, name, sql FROM sqlite_master ORDER BY name")] == [
            tuple(r) for r in schema
        ]
        assert (await again.fetchone("SELECT name FROM knowledge_group WHERE id = 'g'"))[0] == "kept"
    finally:
        await again.close()


async def test_older_database_is_upgraded_in_order_and_keeps_its_rows(tmp_path):
    path = tmp_path / DB_FILENAME
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in split_script(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g', 'old', ?, ?)", (NOW, NOW))
    conn.close()

    database = await Database.open(tmp_path)
    try:
        assert await database.user_version() == SCHEMA_VERSION
        assert await database.fetchone("SELECT 1 FROM sqlite_master WHERE name = 'item_type_is_immutable'")
        assert (await database.fetchone("SELECT name FROM knowledge_group"))[0] == "old"
    finally:
        await database.close()


async def test_newer_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / DB_FILENAME
    conn = sqlite3.connect(path)  # rollback-journal mode, as a future ktui might leave it
    conn.execute("CREATE TABLE future (x)")
    conn.execute("INSERT INTO future VALUES (42)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = path.read_bytes()

    with pytest.raises(SchemaVersionError, match=r"newer ktui.*upgrade"):
        await Database.open(tmp_path)

    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [DB_FILENAME]  # no -wal / -shm left behind
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert check.execute("SELECT name FROM sqlite_master").fetchall() == [("future",)]
    finally:
        check.close()


async def test_newer_wal_database_is_refused_and_its_file_untouched(tmp_path):
    path = tmp_path / DB_FILENAME
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE future (x)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()  # clean close: checkpointed, -wal removed
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError):
        await Database.open(tmp_path)
    assert path.read_bytes() == before


async def test_busy_timeout_waits_for_another_writer(db):
    """A second process holding the write lock for a moment delays our write instead of
    failing with 'database is locked'."""
    other = sqlite3.connect(db.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    loop = asyncio.get_running_loop()
    release = loop.call_later(0.4, other.execute, "COMMIT")
    started = loop.time()
    try:
        async with db.transaction() as conn:
            await conn.execute(
                "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g', 'x', ?, ?)", (NOW, NOW)
            )
    finally:
        release.cancel()
        other.close()
    assert loop.time() - started >= 0.3
    assert (await db.fetchone("SELECT count(*) FROM knowledge_group"))[0] == 1


async def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path):
    (tmp_path / DB_FILENAME).write_bytes(b"this is not SQLite at all" * 100)
    with pytest.raises(StoreError, match=DB_FILENAME):
        await Database.open(tmp_path)


async def test_a_data_dir_that_is_a_file_is_a_store_error(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="Cannot open database"):
        await Database.open(blocker)


async def test_migration_waits_for_a_concurrent_migrator_instead_of_failing(tmp_path):
    """Two ktui processes opening a fresh data dir: the one that loses the write lock
    must see the winner's migration, not run CREATE TABLE a second time."""
    path = tmp_path / DB_FILENAME
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("BEGIN IMMEDIATE")  # the other process holds the write lock...
    opening = asyncio.create_task(Database.open(tmp_path))
    await asyncio.sleep(0.3)  # ...while we read user_version 0 and queue for the lock
    assert not opening.done()
    for statement in split_script(MIGRATIONS[0]):  # ...and migrates first
        other.execute(statement)
    other.execute("PRAGMA user_version = 1")
    other.execute("COMMIT")
    other.close()
    database = await asyncio.wait_for(opening, 10)
    try:
        assert await database.user_version() == SCHEMA_VERSION
    finally:
        await database.close()


@pytest.mark.slow
async def test_concurrent_opens_of_a_fresh_data_dir(tmp_path):
    """Several connections opening one fresh file at once: switching it to WAL answers
    'database is locked' immediately (no busy handler) for the losers; they must retry,
    not fail. A race, so many rounds (it failed about one round in 30 before the fix)."""
    for round_ in range(30):
        opened = await asyncio.gather(
            *(Database.open(tmp_path / str(round_)) for _ in range(8)), return_exceptions=True
        )
        try:
            assert [type(d) for d in opened] == [Database] * 8, [d for d in opened if not isinstance(d, Database)]
            assert {await d.user_version() for d in opened} == {SCHEMA_VERSION}
        finally:
            for d in opened:
                if isinstance(d, Database):
                    await d.close()


def test_split_script_keeps_trigger_bodies_whole():
    statements = split_script(MIGRATIONS[0])
    triggers = [s for s in statements if "CREATE TRIGGER" in s]
    assert len(triggers) == 2
    assert all(t.rstrip().endswith("END;") and "RAISE(ABORT" in t for t in triggers)
    assert not any(s.lstrip().startswith("--") for s in statements)
    for statement in statements:
        assert sqlite3.complete_statement(statement), statement


async def test_transaction_rolls_back_on_error_and_stays_usable(db):
    with pytest.raises(RuntimeError):
        async with db.transaction() as conn:
            await conn.execute(
                "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g', 'x', ?, ?)", (NOW, NOW)
            )
            raise RuntimeError("boom")
    assert await db.fetchone("SELECT * FROM knowledge_group") is None
    assert not db._conn.in_transaction
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g', 'x', ?, ?)", (NOW, NOW)
        )
    assert (await db.fetchone("SELECT count(*) FROM knowledge_group"))[0] == 1


async def test_transaction_rolls_back_when_cancelled(db):
    started = asyncio.Event()

    async def writer():
        async with db.transaction() as conn:
            await conn.execute(
                "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g', 'x', ?, ?)", (NOW, NOW)
            )
            started.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(writer())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await db.fetchone("SELECT * FROM knowledge_group") is None


# --- ids and timestamps ----------------------------------------------------


def test_ids_are_version_7_uuids_in_creation_order():
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(uuid.UUID(i).version == 7 for i in ids)


def test_ids_stay_ordered_past_4096_in_one_millisecond(monkeypatch):
    frozen = 1_800_000_000_000 * 1_000_000
    monkeypatch.setattr(idsmod, "time", SimpleNamespace(time_ns=lambda: frozen))
    monkeypatch.setattr(idsmod, "_last_ms", 0)
    monkeypatch.setattr(idsmod, "_seq", 0)
    ids = [new_id() for _ in range(10_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_ids_stay_ordered_when_the_clock_goes_back(monkeypatch):
    clock = iter([5_000, 5_000, 4_000, 3_000, 5_001])  # milliseconds
    monkeypatch.setattr(idsmod, "time", SimpleNamespace(time_ns=lambda: next(clock) * 1_000_000))
    monkeypatch.setattr(idsmod, "_last_ms", 0)
    monkeypatch.setattr(idsmod, "_seq", 0)
    ids = [new_id() for _ in range(5)]
    assert ids == sorted(ids)


def test_timestamps_sort_lexically_in_time_order():
    stamps = [utc_now() for _ in range(200)]
    assert stamps == sorted(stamps)
    assert all(s.endswith("Z") and len(s) == len("2026-01-01T00:00:00.000000Z") for s in stamps)


# --- schema rules, raw SQL ---------------------------------------------------

BASE_OK = {
    "id": "b1",
    "name": "Base",
    "group_id": None,
    "emoji": "📁",
    "dimensions": 8,
    "embedding_model_id": "builtin::wordllama",
    "status": "completed",
    "error": None,
    "chunk_size": 1024,
    "chunk_overlap": 200,
    "threshold": None,
    "document_count": None,
    "search_mode": "hybrid",
    "hybrid_alpha": 0.5,
    "created_at": NOW,
    "updated_at": NOW,
}


def insert_base(conn, **overrides) -> None:
    row = {**BASE_OK, **overrides}
    conn.execute(
        f"INSERT INTO knowledge_base ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
    )


def insert_item(conn, ident: str, type: str = "file", *, base_id: str = "b1",
                group_id: str | None = None, status: str = "idle", phase: str | None = None,
                error: str | None = None, data: str = '{"path":"/x","source":"/x"}') -> None:
    conn.execute(
        "INSERT INTO knowledge_item (id, base_id, group_id, type, data, status, phase, error, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (ident, base_id, group_id, type, data, status, phase, error, NOW, NOW),
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"status": "indexing"},
        {"status": "failed", "error": None},
        {"status": "failed", "error": "out_of_disk"},
        {"status": "completed", "error": "missing_embedding_model"},
        {"error": "missing_embedding_model"},
        {"embedding_model_id": None},
        {"dimensions": None},
        {"embedding_model_id": "wordllama"},
        {"embedding_model_id": "::wordllama"},
        {"status": "failed", "error": "missing_embedding_model"},  # failed but the model is still set
        {"dimensions": 0},
        {"dimensions": -3},
        {"chunk_size": 0, "chunk_overlap": 0},
        {"chunk_overlap": 1024},
        {"chunk_overlap": 2000},
        {"chunk_overlap": -1},
        {"threshold": -0.01},
        {"threshold": 1.01},
        {"document_count": 0},
        {"search_mode": "vector"},
        {"hybrid_alpha": 1.5},
        {"hybrid_alpha": -0.1},
        {"search_mode": "bm25", "hybrid_alpha": 0.5},
        {"search_mode": "default", "hybrid_alpha": 0.0},
        {"name": "   "},
        {"emoji": ""},
        {"group_id": "no-such-group"},
    ],
)
def test_base_check_constraints_refuse_bad_rows(raw, overrides):
    with pytest.raises(INTEGRITY):
        insert_base(raw, **overrides)
    assert raw.execute("SELECT count(*) FROM knowledge_base").fetchone()[0] == 0


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"search_mode": "bm25", "hybrid_alpha": None},
        {"threshold": 0.0, "document_count": 1},
        {"threshold": 1.0},
        {"status": "failed", "error": "missing_embedding_model", "embedding_model_id": None, "dimensions": None},
        {"status": "failed", "error": "missing_embedding_model", "embedding_model_id": None},
        {"search_mode": "hybrid", "hybrid_alpha": None},
    ],
)
def test_base_check_constraints_accept_good_rows(raw, overrides):
    insert_base(raw, **overrides)
    assert raw.execute("SELECT count(*) FROM knowledge_base").fetchone()[0] == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"type": "folder"},
        {"status": "done"},
        {"status": "idle", "phase": "reading"},
        {"status": "idle", "error": "x"},
        {"status": "completed", "phase": "embedding"},
        {"status": "completed", "error": "x"},
        {"status": "processing", "phase": "reading", "error": "x"},
        {"status": "processing", "error": "x"},
        {"status": "failed"},
        {"status": "failed", "error": ""},
        {"status": "failed", "error": "   "},
        {"status": "failed", "phase": "reading", "error": "x"},
        {"status": "processing", "phase": "bogus"},
        {"status": "processing", "phase": "preparing"},  # a file never prepares
        {"type": "note", "status": "processing", "phase": "preparing"},
        {"type": "url", "status": "processing", "phase": "preparing"},
        {"type": "directory", "status": "processing", "phase": "reading"},
        {"type": "sitemap", "status": "processing", "phase": "embedding"},
        {"data": "{not json"},
        {"base_id": "no-such-base"},
    ],
)
def test_item_check_constraints_refuse_bad_rows(raw, kwargs):
    insert_base(raw)
    with pytest.raises(INTEGRITY):
        insert_item(raw, "i1", **kwargs)
    assert raw.execute("SELECT count(*) FROM knowledge_item").fetchone()[0] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"status": "idle"},
        {"status": "processing"},  # queued: no phase yet
        {"status": "processing", "phase": "reading"},
        {"type": "note", "status": "processing", "phase": "embedding"},
        {"type": "url", "status": "completed"},
        {"type": "directory", "status": "processing", "phase": "preparing"},
        {"type": "sitemap", "status": "processing", "phase": "preparing"},
        {"type": "sitemap", "status": "failed", "error": "HTTP 404"},
        {"status": "failed", "error": "unreadable"},
    ],
)
def test_item_check_constraints_accept_good_rows(raw, kwargs):
    insert_base(raw)
    insert_item(raw, "i1", **kwargs)
    assert raw.execute("SELECT count(*) FROM knowledge_item").fetchone()[0] == 1


@pytest.mark.parametrize("owner_type", ["file", "url", "note"])
def test_group_owner_must_be_a_container(raw, owner_type):
    insert_base(raw)
    insert_item(raw, "leaf", owner_type)
    with pytest.raises(INTEGRITY, match="directory or sitemap"):
        insert_item(raw, "child", "file", group_id="leaf")
    insert_item(raw, "dir", "directory")
    insert_item(raw, "moved", "file", group_id="dir")
    with pytest.raises(INTEGRITY, match="directory or sitemap"):
        raw.execute("UPDATE knowledge_item SET group_id = 'leaf' WHERE id = 'moved'")
    assert raw.execute("SELECT group_id FROM knowledge_item WHERE id = 'moved'").fetchone()[0] == "dir"


@pytest.mark.parametrize("owner_type", ["directory", "sitemap"])
def test_group_owner_may_be_a_directory_or_sitemap(raw, owner_type):
    insert_base(raw)
    insert_item(raw, "owner", owner_type)
    insert_item(raw, "child", "url", group_id="owner")
    assert raw.execute("SELECT group_id FROM knowledge_item WHERE id = 'child'").fetchone()[0] == "owner"


def test_group_owner_must_belong_to_the_same_base(raw):
    insert_base(raw, id="b1")
    insert_base(raw, id="b2")
    insert_item(raw, "dir", "directory", base_id="b1")
    with pytest.raises(INTEGRITY, match="(?i)foreign key"):
        insert_item(raw, "child", "file", base_id="b2", group_id="dir")
    insert_item(raw, "other", "file", base_id="b2")
    with pytest.raises(INTEGRITY, match="(?i)foreign key"):
        raw.execute("UPDATE knowledge_item SET group_id = 'dir' WHERE id = 'other'")


def test_group_owner_must_exist_and_cannot_be_the_item_itself(raw):
    insert_base(raw)
    with pytest.raises(INTEGRITY):
        insert_item(raw, "child", "file", group_id="ghost")
    insert_item(raw, "dir", "directory")
    with pytest.raises(INTEGRITY):
        raw.execute("UPDATE knowledge_item SET group_id = 'dir' WHERE id = 'dir'")


def test_item_type_cannot_change(raw):
    insert_base(raw)
    insert_item(raw, "dir", "directory")
    insert_item(raw, "child", "file", group_id="dir")
    with pytest.raises(INTEGRITY, match="type cannot change"):
        raw.execute("UPDATE knowledge_item SET type = 'file' WHERE id = 'dir'")
    raw.execute("UPDATE knowledge_item SET type = 'directory' WHERE id = 'dir'")  # same value is fine


def _tree(raw) -> None:
    """b1: d1 / d2 / d3 / f4 (four levels), plus a sibling file f1 under d1 and a root note."""
    insert_base(raw)
    insert_item(raw, "d1", "directory")
    insert_item(raw, "f1", "file", group_id="d1")
    insert_item(raw, "d2", "directory", group_id="d1")
    insert_item(raw, "d3", "sitemap", group_id="d2")
    insert_item(raw, "f4", "url", group_id="d3")
    insert_item(raw, "n", "note")


def test_deleting_a_container_cascades_through_nested_containers(raw):
    _tree(raw)
    raw.execute("DELETE FROM knowledge_item WHERE id = 'd2'")
    assert sorted(r[0] for r in raw.execute("SELECT id FROM knowledge_item")) == ["d1", "f1", "n"]
    raw.execute("DELETE FROM knowledge_item WHERE id = 'd1'")
    assert [r[0] for r in raw.execute("SELECT id FROM knowledge_item")] == ["n"]


def test_deleting_a_base_cascades_to_every_item(raw):
    _tree(raw)
    insert_base(raw, id="b2")
    insert_item(raw, "other", "note", base_id="b2")
    raw.execute("DELETE FROM knowledge_base WHERE id = 'b1'")
    assert [r[0] for r in raw.execute("SELECT id FROM knowledge_item")] == ["other"]


def test_deleting_a_group_ungroups_its_bases(raw):
    raw.execute("INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g', 'G', ?, ?)", (NOW, NOW))
    insert_base(raw, group_id="g")
    raw.execute("DELETE FROM knowledge_group WHERE id = 'g'")
    assert raw.execute("SELECT id, group_id FROM knowledge_base").fetchall() == [("b1", None)]


def test_a_deep_chain_cascades(raw):
    insert_base(raw)
    insert_item(raw, "c0", "directory")
    for i in range(1, 60):
        insert_item(raw, f"c{i}", "directory", group_id=f"c{i - 1}")
    raw.execute("DELETE FROM knowledge_item WHERE id = 'c0'")
    assert raw.execute("SELECT count(*) FROM knowledge_item").fetchone()[0] == 0

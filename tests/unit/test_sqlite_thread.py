"""core.sqlite_thread: one connection, one thread, calls in submission order, and a
transaction function that ends as a whole even when its caller is cancelled."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from ktui.core.db import Database
from ktui.core.sqlite_thread import AsyncConnection

NOW = "2026-01-01T00:00:00.000000Z"


@pytest.fixture
async def conn(tmp_path):
    c = await AsyncConnection.connect(tmp_path / "t.sqlite", name="test-sqlite")
    await c.execute("CREATE TABLE t (n INTEGER)")
    yield c
    await c.close()


async def test_every_call_runs_on_one_thread_in_submission_order(conn):
    seen: list[tuple[int, int]] = []

    def record(i: int):
        def run(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO t VALUES (?)", (i,))
            seen.append((threading.get_ident(), i))
        return run

    await asyncio.gather(*(conn.call(record(i)) for i in range(50)))
    assert [i for _, i in seen] == list(range(50))
    assert len({ident for ident, _ in seen}) == 1
    assert seen[0][0] != threading.get_ident()  # never the event loop's thread
    rows = await conn.execute_fetchall("SELECT n FROM t ORDER BY rowid")
    assert [r["n"] for r in rows] == list(range(50))


async def test_statements_return_their_rows_and_rowcount(conn):
    await conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
    async with conn.execute("SELECT n FROM t ORDER BY n") as cur:
        assert (await cur.fetchone())["n"] == 1
        assert [r["n"] for r in await cur.fetchall()] == [2, 3]
        assert await cur.fetchone() is None
    result = await conn.execute("DELETE FROM t WHERE n > ?", (1,))
    assert result.rowcount == 2


async def test_a_closed_connection_refuses_calls(tmp_path):
    c = await AsyncConnection.connect(tmp_path / "c.sqlite")
    await c.close()
    await c.close()  # twice is fine
    with pytest.raises(sqlite3.ProgrammingError):
        await c.execute("SELECT 1")


async def test_run_in_transaction_commits_whole_when_its_caller_is_cancelled(tmp_path):
    db = await Database.open(tmp_path / "data")
    inside, release = threading.Event(), threading.Event()

    def write(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g1', 'a', ?, ?)",
                  (NOW, NOW))
        inside.set()
        release.wait()
        c.execute("INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g2', 'b', ?, ?)",
                  (NOW, NOW))

    task = asyncio.create_task(db.run_in_transaction(write))
    await asyncio.to_thread(inside.wait)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = await db.fetchall("SELECT id FROM knowledge_group ORDER BY id")
    assert [r["id"] for r in rows] == ["g1", "g2"]  # both or neither, never half
    await db.close()


async def test_run_in_transaction_rolls_back_when_the_function_raises(tmp_path):
    db = await Database.open(tmp_path / "data")

    def write(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES ('g1', 'a', ?, ?)",
                  (NOW, NOW))
        raise ValueError("boom")

    with pytest.raises(ValueError):
        await db.run_in_transaction(write)
    assert await db.fetchall("SELECT id FROM knowledge_group") == []
    assert not db._conn.in_transaction
    await db.close()

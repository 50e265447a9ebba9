"""What the lease tests and benchmark share: the real PostgreSQL catalogue in a schema
(PgDatabase's migrations, item_lease included), items in it, and a clock the test
advances from another process.

The clock is a one-row table: every worker process reads it as its now, and the test
moves it forward, so expiry is driven without anyone sleeping through a TTL. Each
completion also adds a row to ``done`` (item, worker): an item completed twice would
show there twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import sql

BASE = "lease-base"
START = 1_000_000.0  # the fake clock's epoch seconds at the start of a test
CLOCK_DDL = "CREATE TABLE IF NOT EXISTS test_clock (one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one), now DOUBLE PRECISION NOT NULL)"
LOG_TABLES = ("done", "work_log", "lost")  # (item_id, worker): completions, items started, completions refused
T = TypeVar("T")


def connect(url: str, schema: str) -> psycopg.Connection[Any]:
    """An autocommit connection with `schema` first on its search path."""
    con = psycopg.connect(url, autocommit=True)
    con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return con


def catalogue(url: str, schema: str) -> None:
    """The real catalogue's tables in `schema` (PgDatabase migrates it on open)."""
    from ktui.core.store.postgres.catalogue import PgDatabase

    async def run() -> None:
        db = await PgDatabase.open(url, schema=schema)
        await db.close()

    asyncio.run(run())


def prepare(con: psycopg.Connection[Any], items: int = 0, prefix: str = "item") -> list[str]:
    """The clock and log tables and one base (the catalogue must exist: `catalogue`), plus
    `items` `processing` note items in it (their ids returned)."""
    con.execute(CLOCK_DDL)
    con.execute("INSERT INTO test_clock (now) VALUES (%s) ON CONFLICT DO NOTHING", (START,))
    for table in LOG_TABLES:
        con.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (item_id TEXT NOT NULL, worker TEXT NOT NULL)").format(
            sql.Identifier(table)))
    con.execute(
        "INSERT INTO knowledge_base (id, name, dimensions, embedding_model_id, created_at, updated_at) "
        "VALUES (%s, 'leases', 16, 'test::deterministic', 'now', 'now') ON CONFLICT DO NOTHING", (BASE,))
    ids = [f"{prefix}-{n:05d}" for n in range(items)]
    if ids:
        con.execute(
            "INSERT INTO knowledge_item (id, base_id, type, data, status, created_at, updated_at) "
            "SELECT i, %s, 'note', '{}', 'processing', i, i FROM unnest(%s::text[]) i", (BASE, ids))
    return ids


class TableClock:
    """A clock read from `test_clock` on its own connection (each worker has one)."""

    def __init__(self, con: psycopg.Connection[Any]):
        self._con = con

    def __call__(self) -> float:
        row = self._con.execute("SELECT now FROM test_clock").fetchone()
        assert row is not None
        return float(row[0])

    def advance(self, seconds: float) -> None:
        self._con.execute("UPDATE test_clock SET now = now + %s", (seconds,))


def complete_items(con: psycopg.Connection[Any], held: list[str], worker: str = "test") -> int:
    """The caller's completion write: held items become `completed`, each completion a
    row of `done`."""
    con.execute("INSERT INTO done (item_id, worker) SELECT unnest(%s::text[]), %s", (held, worker))
    return con.execute("UPDATE knowledge_item SET status = 'completed' WHERE id = ANY(%s)", (held,)).rowcount


def completions(con: psycopg.Connection[Any]) -> dict[str, int]:
    """Item id -> how many times it was completed (0 for none)."""
    rows = con.execute(
        "SELECT k.id, count(d.item_id) FROM knowledge_item k LEFT JOIN done d ON d.item_id = k.id GROUP BY k.id"
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


@dataclass(frozen=True)
class Completion(Generic[T]):
    """What `complete` did: the items whose leases were still held (and so written), those
    lost to another owner (nothing written for them), and what the write returned (None
    when nothing was held and nothing ran)."""

    held: list[str]
    lost: list[str]
    result: T | None


def complete(leases: Any, con: psycopg.Connection[Any], item_ids: Sequence[str],
             write: Callable[[psycopg.Connection[Any], list[str]], T]) -> Completion[T]:
    """A worker's completion as the runtime does it (PgWorkClaims' guard): in one
    transaction take this owner's leases back (``Leases.take_back``) and write the outcome
    of exactly the held items; none held, nothing written. Whatever `write` raises rolls
    it all back (the leases stay). `con` is autocommit: the transaction is this call's own
    (inside a catalogue transaction the runtime calls take_back itself, never this)."""
    ids = sorted(set(item_ids))
    if not ids:
        return Completion([], [], None)
    assert con.autocommit, "complete() opens its own transaction"
    result: T | None = None
    with con.transaction():
        held = leases.take_back(con, ids)
        if held:
            result = write(con, held)
    return Completion(held, [i for i in ids if i not in set(held)], result)

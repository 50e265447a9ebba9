"""What the lease tests and benchmark share: a catalogue's item table in a PostgreSQL
schema, the lease table, and a clock the test advances from another process.

Until the PostgreSQL catalogue (PG_PLAN, pgcat) lands, ``knowledge_item`` here is the
part of the real table the leases use: id, status (with the real CHECK), created_at.
The clock is a one-row table: every worker process reads it as its now, and the test
moves it forward, so expiry is driven without anyone sleeping through a TTL.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from ktui.core.store.postgres.leases import ensure_lease_table

ITEMS_DDL = """
CREATE TABLE IF NOT EXISTS knowledge_item (
    id          TEXT PRIMARY KEY,
    status      TEXT NOT NULL DEFAULT 'processing' CHECK (status IN ('idle', 'processing', 'completed', 'failed')),
    created_at  TEXT NOT NULL DEFAULT '',
    completions INTEGER NOT NULL DEFAULT 0
)"""
CLOCK_DDL = "CREATE TABLE IF NOT EXISTS test_clock (one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one), now DOUBLE PRECISION NOT NULL)"
START = 1_000_000.0  # the fake clock's epoch seconds at the start of a test


def connect(url: str, schema: str) -> psycopg.Connection[Any]:
    """An autocommit connection with `schema` first on its search path."""
    con = psycopg.connect(url, autocommit=True)
    con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return con


def prepare(con: psycopg.Connection[Any], items: int = 0, prefix: str = "item") -> list[str]:
    """The item, lease and clock tables; `items` `processing` items (their ids returned)."""
    con.execute(ITEMS_DDL)
    con.execute(CLOCK_DDL)
    con.execute("INSERT INTO test_clock (now) VALUES (%s) ON CONFLICT DO NOTHING", (START,))
    ensure_lease_table(con)
    ids = [f"{prefix}-{n:05d}" for n in range(items)]
    if ids:
        con.execute("INSERT INTO knowledge_item (id, created_at) SELECT i, i FROM unnest(%s::text[]) i", (ids,))
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


def complete_items(con: psycopg.Connection[Any], held: list[str]) -> int:
    """The caller's completion write: held items become `completed`, their completions
    counted (a second completion of one item would show as 2)."""
    return con.execute(
        "UPDATE knowledge_item SET status = 'completed', completions = completions + 1 WHERE id = ANY(%s)", (held,)
    ).rowcount

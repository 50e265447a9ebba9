"""Catalogue databases of either backend for the catalogue-level tests: the same
assertions on SQLite (a real `knowledge.db`) and PostgreSQL (a real schema of the
pgserver fixture, tests/support/postgres.py, dropped afterwards).

A test module says `db = catalogue_fixture()` and every test that asks for `db` (or for
a fixture built on it: `bases`, `items` of tests/integration/conftest.py) runs once per
backend. PostgreSQL is started only when a `postgres` case runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

BACKENDS = ["sqlite", "postgres"]


async def open_catalogue(kind: str, request: Any, tmp_path: Path) -> Any:
    if kind == "sqlite":
        from ktui.core.db import Database

        return await Database.open(tmp_path / "data")
    from ktui.core.store.postgres.catalogue import PgDatabase

    server = request.getfixturevalue("postgres_server")
    schema = request.getfixturevalue("pg_schema")
    return await PgDatabase.open(server.url, schema=schema)


def catalogue_fixture() -> Any:
    @pytest.fixture(params=BACKENDS)
    async def db(request: Any, tmp_path: Path) -> Any:
        database = await open_catalogue(request.param, request, tmp_path)
        yield database
        await database.close()

    return db


def statement_conn(db: Any) -> Any:
    """The connection a transaction of `db` uses, for a look from inside one (bypassing
    the lock the transaction holds)."""
    return db._async if hasattr(db, "_async") else db._conn

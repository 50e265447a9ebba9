"""Chunk stores of either backend for the contract tests: the same assertions on SQLite and PostgreSQL.

`BACKENDS` are the parameters; `open_store(kind, ...)` opens an empty store of that
backend (a real SQLite file, or a real PostgreSQL schema of tests/support/postgres.py)
inside an ExitStack that closes and removes it. `fts_count` asks the backend's own
full-text index how many chunks hold a word, below the store's search.
"""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from pathlib import Path
from typing import Any

BACKENDS = ["sqlite", "postgres"]


def open_store(kind: str, stack: ExitStack, tmp_path: Path, dimensions: int, server: Any = None) -> Any:
    if kind == "sqlite":
        from ktui.core.store import BaseStore

        store = BaseStore.open(tmp_path / "bases" / "b.sqlite", dimensions, create=True)
        stack.callback(store.close)
        return store
    from ktui.core.store.postgres import PgStoreManager

    schema = stack.enter_context(server.schema())
    manager = PgStoreManager(server.url, schema=schema)
    stack.callback(manager.close_all)
    return manager.create("b", dimensions)


def fts_count(store: Any, word: str) -> int:
    """Chunks whose full-text entry holds ``word``, read from the index itself."""
    if hasattr(store, "path"):
        con = sqlite3.connect(store.path)
        try:
            return int(con.execute("SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH ?", (f'"{word}"',)).fetchone()[0])
        finally:
            con.close()
    from psycopg import sql

    with store._pool.connection() as con:
        row = con.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE fts @@ CAST(%s AS tsquery)").format(sql.Identifier(store.table)),
            (f"'{word}'",),
        ).fetchone()
    return int(row[0])

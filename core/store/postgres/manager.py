"""PgStoreManager: the chunk stores of one data directory kept in one PostgreSQL schema.

The counterpart of :class:`core.store.StoreManager` for PostgreSQL, as a library piece:
``create`` / ``get`` / ``destroy`` a base's store, ``base_ids``, ``close_all``. Several
managers (in several processes, on several machines) may use the same schema at once;
creating and dropping a base's table are single transactions.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ktui.core.errors import StoreError

from .connection import Connections, scrub
from .schema import REGISTRY, SCHEMA_VERSION, create_chunk_table, ensure_registry
from .store import PgBaseStore, PgTuning

_BASE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class PgStoreManager:
    """Owns the open PgBaseStores of one schema. Thread-safe."""

    def __init__(self, url: str, *, schema: str = "ktui", tuning: PgTuning | None = None, pool_size: int = 4):
        self.tuning = tuning or PgTuning()
        self._pool = Connections(url, schema, pool_size)
        self.where = f"PostgreSQL store {self._pool.where} (schema {schema})"
        self._stores: dict[str, PgBaseStore] = {}
        self._lock = threading.Lock()
        self._ready = False

    def _check_id(self, base_id: str) -> None:
        if not isinstance(base_id, str) or not _BASE_ID.match(base_id):
            raise StoreError(f"Invalid base id for a store: {base_id!r}")

    @contextmanager
    def _registry(self, action: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one registry job (the registry is made on first use);
        PostgreSQL failures become StoreError naming the server without its password."""
        try:
            with self._pool.connection() as con:
                if not self._ready:
                    ensure_registry(con, self._pool.schema)
                    self._ready = True
                yield con
        except psycopg.Error as exc:
            detail = scrub(str(exc).strip() or type(exc).__name__, self._pool.url)
            raise StoreError(f"{self.where}: could not {action}: {detail}") from exc

    def create(self, base_id: str, dimensions: int) -> PgBaseStore:
        """Create the base's store (StoreError when it already exists)."""
        self._check_id(base_id)
        _check_dimensions(dimensions)
        with self._lock, self._registry(f"create the store of base {base_id}") as con:
            with con.transaction():
                con.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(sql.Identifier(REGISTRY)))
                exists = con.execute(
                    sql.SQL("SELECT 1 FROM {} WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (base_id,)
                ).fetchone()
                if exists:
                    raise StoreError(f"{self.where}: base {base_id} already has a store")
                row = con.execute("SELECT nextval('ktui_chunk_table_seq')").fetchone()
                assert row is not None
                table = f"chunk_{row[0]}"
                create_chunk_table(con, table, dimensions)
                con.execute(
                    sql.SQL("INSERT INTO {} (base_id, chunk_table, dimensions, schema_version) VALUES (%s, %s, %s, %s)").format(
                        sql.Identifier(REGISTRY)
                    ),
                    (base_id, table, dimensions, SCHEMA_VERSION),
                )
            store = PgBaseStore(self._pool, base_id, table, dimensions, self.tuning)
            self._stores[base_id] = store
            return store

    def get(self, base_id: str, dimensions: int) -> PgBaseStore:
        """The store of a base (StoreError when it has none, or one of another width)."""
        self._check_id(base_id)
        with self._lock:
            store = self._stores.get(base_id)
            if store is None:
                with self._registry(f"open the store of base {base_id}") as con:
                    row = con.execute(
                        sql.SQL("SELECT chunk_table, dimensions, schema_version FROM {} WHERE base_id = %s").format(
                            sql.Identifier(REGISTRY)
                        ),
                        (base_id,),
                    ).fetchone()
                if row is None:
                    raise StoreError(f"{self.where}: base {base_id} has no store")
                if int(row[2]) > SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.where}: base {base_id} was written by a newer ktui (store schema {row[2]}); upgrade ktui"
                    )
                store = PgBaseStore(self._pool, base_id, str(row[0]), int(row[1]), self.tuning)
                self._stores[base_id] = store
        if store.dimensions != dimensions:
            raise StoreError(f"{store.where} holds {store.dimensions}-dimension vectors, not {dimensions}")
        return store

    def get_if_open(self, base_id: str, dimensions: int) -> PgBaseStore | None:
        """The base's store if this manager has opened it (no lock, no I/O)."""
        store = self._stores.get(base_id)
        return store if store is not None and store.dimensions == dimensions else None

    def problem(self, base_id: str) -> str | None:
        """Nothing is known without a round trip: a missing table shows when the store is used."""
        return None

    def where_of(self, base_id: str) -> str:
        return f"{self.where}, base {base_id}"

    def exists(self, base_id: str) -> bool:
        self._check_id(base_id)
        with self._registry(f"look up the store of base {base_id}") as con:
            row = con.execute(
                sql.SQL("SELECT 1 FROM {} WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (base_id,)
            ).fetchone()
        return row is not None

    def rebuild(self, base_id: str, dimensions: int) -> None:
        """Drop the base's table (if any) and create an empty one; nothing is kept aside
        (a table has no half-written file to inspect). Returns None: nothing was moved."""
        self.destroy(base_id)
        self.create(base_id, dimensions)

    def set_aside(self, base_id: str, reason: str) -> str | None:
        """An unusable store is dropped (the base then rebuilds from its sources)."""
        self.destroy(base_id)
        return None

    def drop_matrix(self, base_id: str) -> list[Path]:
        """No derived vector files on PostgreSQL: nothing to delete."""
        return []

    def stray_files(self, known_ids: set[str]) -> list[Path]:
        """No files on PostgreSQL (a stray table is dropped by `destroy`)."""
        return []

    def base_ids(self) -> set[str]:
        """Every base that has a store in this schema."""
        with self._registry("list the stores") as con:
            return {r[0] for r in con.execute(sql.SQL("SELECT base_id FROM {}").format(sql.Identifier(REGISTRY)))}

    def destroy(self, base_id: str) -> list[str]:
        """Drop the base's table and registry row; returns what could NOT be removed (always [] here:
        it is one transaction)."""
        self._check_id(base_id)
        with self._lock:
            store = self._stores.pop(base_id, None)
            if store is not None:
                store.close()
            with self._registry(f"delete the store of base {base_id}") as con:
                with con.transaction():
                    row = con.execute(
                        sql.SQL("DELETE FROM {} WHERE base_id = %s RETURNING chunk_table").format(sql.Identifier(REGISTRY)),
                        (base_id,),
                    ).fetchone()
                    if row is not None:
                        con.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(row[0])))
        return []

    def close_all(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()
        self._pool.close()

    def __contains__(self, base_id: str) -> bool:
        with self._lock:
            return base_id in self._stores


def _check_dimensions(dimensions: int) -> None:
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
        raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
    if dimensions > 16000:
        raise StoreError(f"pgvector stores at most 16,000 dimensions, not {dimensions}")

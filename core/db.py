"""The catalogue database (`knowledge.db`): connection, pragmas, migrations.

One sqlite3 connection per open service, on its own thread (core/sqlite_thread.py). Writers and readers share it, so every
statement sequence goes through `Database.transaction()` / `Database.read()`,
which serialise on one asyncio lock: a coroutine can never observe another's
half-finished transaction on the shared connection.

Schema changes are numbered migrations (core/db_schema.py) applied in order;
`PRAGMA user_version` records the last one. A database written by a newer ktui is
refused, never silently altered. Row ids and timestamps come from core/ids.py.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from ktui.core.catalogue import SQLITE, SqliteDialect, SyncConn
from ktui.core.db_schema import MIGRATIONS, SCHEMA_VERSION, split_script
from ktui.core.errors import ConstraintError, SchemaVersionError, StoreError
from ktui.core.sqlite_thread import AsyncConnection
from ktui.core.storage_faults import rollback_quietly, storage_error

T = TypeVar("T")

DB_FILENAME = "knowledge.db"
BUSY_TIMEOUT_MS = 5000

class Database:
    """The shared connection plus the lock that serialises statement sequences on it.
    Satisfies :class:`ktui.core.catalogue.Catalogue` (PostgreSQL's is PgDatabase)."""

    dialect: SqliteDialect = SQLITE

    def __init__(self, conn: AsyncConnection, path: Path):
        self._conn = conn
        self.path = path
        self._lock = asyncio.Lock()

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    @classmethod
    async def open(cls, data_dir: Path) -> Database:
        path = data_dir / DB_FILENAME
        try:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # private: notes and documents live here
            if not path.exists():  # SQLite gives its -wal/-shm the database file's mode
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            conn = await AsyncConnection.connect(path, name="ktui-catalogue")
        except Exception as exc:  # unreadable dir, not a database...
            fault = storage_error(exc, path)
            if fault is not None:
                raise fault from exc
            if isinstance(exc, FileExistsError):
                raise StoreError(f"Cannot open database {path}: {exc.filename} is a file, not a folder") from exc
            raise StoreError(f"Cannot open database {path}: {exc}") from exc
        db = cls(conn, path)
        try:
            # Refuse a newer database before any pragma that writes (journal_mode = WAL
            # rewrites the header), so it is left byte-for-byte untouched.
            db._refuse_newer(await db._read_version())
            await db._configure()
            await db._migrate()
        except sqlite3.Error as exc:  # locked past the busy timeout, disk full, I/O error...
            await conn.close()
            fault = storage_error(exc, path)
            if fault is not None:
                raise fault from exc
            raise StoreError(f"Cannot prepare database {path}: {exc}") from exc
        except BaseException:
            await conn.close()
            raise
        return db

    @classmethod
    async def open_readonly(cls, data_dir: Path) -> Database:
        """A reader's connection: committed state through SQLite's WAL, never a write.

        No pragma that writes, no migration: `query_only` makes any write fail
        inside SQLite as well. A data directory without a catalogue yet reads as
        an empty one (an in-memory database with the current schema), so a reader
        never creates files the holder would find.
        """
        path = data_dir / DB_FILENAME
        if data_dir.exists() and not data_dir.is_dir():
            raise StoreError(f"Cannot open database {path}: {data_dir} is not a directory")
        exists = path.is_file()
        try:
            if exists:
                conn = await AsyncConnection.connect(f"{path.resolve().as_uri()}?mode=ro", name="ktui-reader", uri=True)
            else:
                conn = await AsyncConnection.connect(":memory:", name="ktui-reader")
        except Exception as exc:
            raise StoreError(f"Cannot open database {path}: {exc}") from exc
        db = cls(conn, path)
        try:
            version = await db._read_version()
            db._refuse_newer(version)
            if not exists:
                await db._migrate()
            await conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            await conn.close()
            raise StoreError(f"Cannot read database {path}: {exc}") from exc
        except BaseException:
            await conn.close()
            raise
        return db

    async def _read_version(self) -> int:
        try:
            await self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            async with self._conn.execute("PRAGMA user_version") as cur:
                (version,) = await cur.fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a usable SQLite database: {exc}") from exc
        return int(version)

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self.path} was written by a newer ktui (schema {version}, this version "
                f"understands up to {SCHEMA_VERSION}); upgrade ktui to open it"
            )

    async def _configure(self) -> None:
        for pragma in (
            f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
            "PRAGMA journal_mode = WAL",
            "PRAGMA foreign_keys = ON",
            "PRAGMA synchronous = NORMAL",
        ):
            deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
            while True:
                try:
                    await self._conn.execute(pragma)
                    break
                except sqlite3.OperationalError as exc:
                    # Switching to WAL needs an exclusive lock and SQLite answers "locked"
                    # at once (no busy handler) while another connection opens the same
                    # fresh file: retry within the busy timeout.
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise StoreError(f"{self.path} is not a usable SQLite database: {exc}") from exc
                    await asyncio.sleep(0.01)
                except sqlite3.DatabaseError as exc:
                    raise StoreError(f"{self.path} is not a usable SQLite database: {exc}") from exc

    async def _migrate(self) -> None:
        while True:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                # Re-read under the write lock: another process (a second ktui, the CLI)
                # may have migrated between our first read and acquiring the lock.
                version = await self._read_version()
                self._refuse_newer(version)
                if version >= SCHEMA_VERSION:
                    await self._conn.execute("COMMIT")
                    return
                for statement in split_script(MIGRATIONS[version]):
                    await self._conn.execute(statement)
                await self._conn.execute(f"PRAGMA user_version = {version + 1}")
                await self._conn.execute("COMMIT")
            except BaseException:
                await self._rollback()
                raise

    async def user_version(self) -> int:
        async with self.read() as conn, conn.execute("PRAGMA user_version") as cur:
            (version,) = await cur.fetchone()
        return int(version)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """BEGIN IMMEDIATE … COMMIT, rolled back on any exception (including cancellation)."""
        async with self._lock:
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                    await self._conn.execute("COMMIT")
                except BaseException:
                    await asyncio.shield(self._rollback())
                    raise
            except sqlite3.Error as exc:
                fault = self._fault(exc)
                if fault is exc:
                    raise
                raise fault from exc

    def _fault(self, exc: sqlite3.Error) -> BaseException:
        """What a failed write raises: a full disk or denied access by name, a schema rule's
        refusal as ConstraintError (as on PostgreSQL), anything else as it came."""
        fault = storage_error(exc, self.path)
        if fault is not None:
            return fault
        if isinstance(exc, sqlite3.IntegrityError):
            return ConstraintError(f"{self.path}: {exc}")
        return exc

    async def _rollback(self) -> None:
        """ROLLBACK unless SQLite already ended the transaction (it does on a full disk):
        a ROLLBACK error must never replace the real cause."""
        if self._conn.in_transaction:
            try:
                await self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    async def run_in_transaction(self, fn: Callable[[SyncConn], T]) -> T:
        """Run `fn(connection)` inside BEGIN IMMEDIATE … COMMIT on the connection's own
        thread, in one hop.

        The hot paths (status writes during indexing) issue half a dozen statements per
        call; awaiting each separately costs a thread round trip and an event-loop
        wake-up apiece. If the caller is cancelled meanwhile, the function still
        commits or rolls back as a whole on the thread.
        """

        def run(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                rollback_quietly(conn)
                raise
            return result

        async with self._lock:
            try:
                return await self._conn.call(run)
            except sqlite3.Error as exc:
                fault = self._fault(exc)
                if fault is exc:
                    raise
                raise fault from exc

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self._lock:
            yield self._conn

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self.read() as conn:
            return list(await conn.execute_fetchall(sql, params))  # one thread hop

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def close(self) -> None:
        async with self._lock:
            await self._conn.close()

"""The catalogue database (`knowledge.db`): connection, pragmas, migrations.

One sqlite3 connection per open service, on its own thread (core/sqlite_thread.py). Writers and readers share it, so every
statement sequence goes through `Database.transaction()` / `Database.read()`,
which serialise on one asyncio lock: a coroutine can never observe another's
half-finished transaction on the shared connection.

Schema changes are numbered migrations applied in order; `PRAGMA user_version`
records the last one. A database written by a newer ktui is refused, never
silently altered.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ktui.core.errors import SchemaVersionError, StoreError
from ktui.core.sqlite_thread import AsyncConnection
from ktui.core.storage_faults import rollback_quietly, storage_error

T = TypeVar("T")

DB_FILENAME = "knowledge.db"
BUSY_TIMEOUT_MS = 5000

_SCHEMA_V1 = """
CREATE TABLE knowledge_group (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL CHECK (length(trim(name)) > 0),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE knowledge_base (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL CHECK (length(trim(name)) > 0),
    group_id            TEXT REFERENCES knowledge_group(id) ON DELETE SET NULL,
    emoji               TEXT NOT NULL DEFAULT '📁' CHECK (length(emoji) > 0),
    dimensions          INTEGER CHECK (dimensions IS NULL OR dimensions > 0),
    embedding_model_id  TEXT CHECK (embedding_model_id IS NULL OR instr(embedding_model_id, '::') > 1),
    status              TEXT NOT NULL DEFAULT 'completed' CHECK (status IN ('completed', 'failed')),
    error               TEXT CHECK (error IS NULL OR error IN ('missing_embedding_model')),
    rerank_model_id     TEXT,
    chunk_size          INTEGER NOT NULL DEFAULT 1024 CHECK (chunk_size > 0),
    chunk_overlap       INTEGER NOT NULL DEFAULT 200 CHECK (chunk_overlap >= 0 AND chunk_overlap < chunk_size),
    threshold           REAL CHECK (threshold IS NULL OR (threshold >= 0 AND threshold <= 1)),
    document_count      INTEGER CHECK (document_count IS NULL OR document_count > 0),
    search_mode         TEXT NOT NULL DEFAULT 'hybrid' CHECK (search_mode IN ('default', 'bm25', 'hybrid')),
    hybrid_alpha        REAL CHECK (hybrid_alpha IS NULL OR (hybrid_alpha >= 0 AND hybrid_alpha <= 1)),
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    -- a runnable base has a model and a width; a failed one says why
    CHECK (
        (status = 'completed' AND error IS NULL AND embedding_model_id IS NOT NULL AND dimensions IS NOT NULL)
        OR (status = 'failed' AND error IS NOT NULL)
    ),
    -- a missing model is recorded as no model at all
    CHECK (error IS NULL OR error <> 'missing_embedding_model' OR embedding_model_id IS NULL),
    CHECK (hybrid_alpha IS NULL OR search_mode = 'hybrid')
);
CREATE INDEX idx_base_created ON knowledge_base (created_at DESC, id DESC);
CREATE INDEX idx_base_group ON knowledge_base (group_id);

CREATE TABLE knowledge_item (
    id          TEXT PRIMARY KEY,
    base_id     TEXT NOT NULL REFERENCES knowledge_base(id) ON DELETE CASCADE,
    group_id    TEXT,
    type        TEXT NOT NULL CHECK (type IN ('file', 'url', 'note', 'directory', 'sitemap')),
    data        TEXT NOT NULL CHECK (json_valid(data)),
    status      TEXT NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'processing', 'completed', 'failed')),
    phase       TEXT CHECK (phase IS NULL OR phase IN ('preparing', 'reading', 'embedding')),
    error       TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (base_id, id),
    FOREIGN KEY (base_id, group_id) REFERENCES knowledge_item (base_id, id) ON DELETE CASCADE,
    CHECK (group_id IS NULL OR group_id <> id),
    CHECK (
        (status IN ('idle', 'completed') AND phase IS NULL AND error IS NULL)
        OR (status = 'processing' AND error IS NULL)
        OR (status = 'failed' AND phase IS NULL AND error IS NOT NULL AND length(trim(error)) > 0)
    ),
    CHECK (
        phase IS NULL
        OR (phase = 'preparing' AND type IN ('directory', 'sitemap'))
        OR (phase IN ('reading', 'embedding') AND type IN ('file', 'url', 'note'))
    )
);
CREATE INDEX idx_item_base_group ON knowledge_item (base_id, group_id, created_at DESC, id DESC);
CREATE INDEX idx_item_group_status ON knowledge_item (group_id, status);
CREATE INDEX idx_item_status ON knowledge_item (status);

-- only directory and sitemap items may own children
CREATE TRIGGER item_owner_is_container_insert
BEFORE INSERT ON knowledge_item
WHEN NEW.group_id IS NOT NULL
 AND (SELECT type FROM knowledge_item WHERE id = NEW.group_id) NOT IN ('directory', 'sitemap')
BEGIN
    SELECT RAISE(ABORT, 'group owner must be a directory or sitemap item');
END;

CREATE TRIGGER item_owner_is_container_update
BEFORE UPDATE OF group_id ON knowledge_item
WHEN NEW.group_id IS NOT NULL
 AND (SELECT type FROM knowledge_item WHERE id = NEW.group_id) NOT IN ('directory', 'sitemap')
BEGIN
    SELECT RAISE(ABORT, 'group owner must be a directory or sitemap item');
END;
"""

_SCHEMA_V2 = """
-- v1 checked the owner's type when a child is inserted or moved, but a container
-- that already has children could still be turned into a leaf. An item's type is
-- fixed at creation (its data and phases depend on it), so refuse any change.
CREATE TRIGGER item_type_is_immutable
BEFORE UPDATE OF type ON knowledge_item
WHEN NEW.type IS NOT OLD.type
BEGIN
    SELECT RAISE(ABORT, 'an item''s type cannot change');
END;
"""

_SCHEMA_V3 = """
-- per-base OCR choices; NULL follows the settings file's [ocr] table
ALTER TABLE knowledge_base ADD COLUMN ocr_enabled INTEGER CHECK (ocr_enabled IS NULL OR ocr_enabled IN (0, 1));
ALTER TABLE knowledge_base ADD COLUMN ocr_languages TEXT CHECK (ocr_languages IS NULL OR length(ocr_languages) > 0);
ALTER TABLE knowledge_base ADD COLUMN ocr_max_pages INTEGER CHECK (ocr_max_pages IS NULL OR ocr_max_pages > 0);
"""

_SCHEMA_V4 = """
-- imports (core/data/imports.py): a base is 'importing' until all its items are in,
-- so a kill mid-import leaves a row that the next writable open discards with its
-- base; the fingerprint of what was imported tells a second import of the same base
CREATE TABLE base_import (
    base_id      TEXT PRIMARY KEY REFERENCES knowledge_base(id) ON DELETE CASCADE,
    fingerprint  TEXT NOT NULL CHECK (length(fingerprint) = 64),
    state        TEXT NOT NULL CHECK (state IN ('importing', 'done')),
    created_at   TEXT NOT NULL
);
CREATE INDEX idx_base_import_fingerprint ON base_import (fingerprint);
"""

MIGRATIONS: Sequence[str] = (_SCHEMA_V1, _SCHEMA_V2, _SCHEMA_V3, _SCHEMA_V4)
"""MIGRATIONS[n] brings a database from user_version n to n + 1. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)


def utc_now() -> str:
    """ISO-8601 UTC with microseconds: sorts lexically in time order."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


_last_ms = 0
_seq = 0


def new_id() -> str:
    """A time-ordered UUID (version 7 layout) so that `id DESC` breaks created_at ties in
    insertion order within this process."""
    global _last_ms, _seq
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        ms = _last_ms
        _seq += 1
        if _seq > 0xFFF:  # 12-bit counter exhausted: borrow the next millisecond
            ms += 1
            _seq = 0
    else:
        _seq = 0
    _last_ms = ms
    rand = int.from_bytes(os.urandom(8), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (_seq & 0xFFF) << 64
    value |= (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


class Database:
    """The shared connection plus the lock that serialises statement sequences on it."""

    def __init__(self, conn: AsyncConnection, path: Path):
        self._conn = conn
        self.path = path
        self._lock = asyncio.Lock()

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
                for statement in _split_script(MIGRATIONS[version]):
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
                fault = storage_error(exc, self.path)
                if fault is not None:
                    raise fault from exc
                raise

    async def _rollback(self) -> None:
        """ROLLBACK unless SQLite already ended the transaction (it does on a full disk):
        a ROLLBACK error must never replace the real cause."""
        if self._conn.in_transaction:
            try:
                await self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    async def run_in_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
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
                fault = storage_error(exc, self.path)
                if fault is not None:
                    raise fault from exc
                raise

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


def _split_script(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (BEGIN … END;) whole.

    executescript() would commit our transaction first; splitting keeps each
    migration atomic with its user_version bump.
    """
    statements: list[str] = []
    buf: list[str] = []
    depth = 0
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        buf.append(line)
        upper = stripped.upper()
        if upper == "BEGIN" or upper.endswith(" BEGIN"):
            depth += 1
        if stripped.endswith(";"):
            if depth and upper == "END;":
                depth -= 1
            if depth == 0:
                statements.append("\n".join(buf))
                buf = []
    if buf:
        statements.append("\n".join(buf))
    return statements

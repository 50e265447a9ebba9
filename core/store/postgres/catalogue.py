"""The catalogue (groups, bases, items, the import ledger) in a PostgreSQL schema.

:class:`PgDatabase` has the interface of SQLite's :class:`ktui.core.db.Database` (both
satisfy :class:`ktui.core.catalogue.Catalogue`), so core/data, the state writer,
the import ledger and recovery run on it unchanged:

* one dedicated psycopg connection on a thread of its own (as SQLite's connection),
  in the schema the chunk stores use, reconnected before a transaction or a read
  when the server hung up on it meanwhile;
* ``?`` placeholders are translated to psycopg's outside string literals and quoted
  names (``%`` doubled); rows read by name and by index like ``sqlite3.Row``; a NUL
  character in a bound string is stored as U+FFFD (PostgreSQL text cannot hold one);
* every write transaction first takes the schema's catalogue lock
  (``pg_advisory_xact_lock``), so the writers of all processes on all machines run
  one after another as SQLite's ``BEGIN IMMEDIATE`` makes them: the data layer reads
  then writes (container reconciliation, unique names) and relies on it. Reads never
  wait for it;
* ``run_in_transaction`` (the state writer's hot path: phases, statuses, completions,
  reconciliation, item deletes) runs in psycopg's pipeline mode: statements whose
  results are not looked at (BEGIN, the lock, writes whose rowcount nobody asks) go
  out without waiting for their answer. Its commits do not wait for the WAL flush
  (``synchronous_commit = off`` for that transaction: a fsync per status write was
  ~80 % of its time): a crash of the *server* may undo its last fraction of a second
  of them (never half a transaction), the loss SQLite's ``synchronous = NORMAL``
  accepts on a power cut; such items are found `processing` and indexed again.
  ``transaction()`` (bases, groups, new items, imports) commits durably;
* a schema rule's refusal raises ConstraintError, any other PostgreSQL failure a
  StoreError naming the server without credentials (:func:`.connection.redact`).

Migrations (core/store/postgres/catalogue_schema.py) run at open under the same lock,
so several processes may open one fresh schema at once; a schema a newer ktui wrote is
refused before anything is written.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

from ktui.core.catalogue import Params, SyncConn
from ktui.core.errors import ConstraintError, SchemaVersionError, StoreError
from ktui.core.sqlite_thread import Pending, Result

from .catalogue_schema import PG_SCHEMA_VERSION, VERSION_TABLE, migration_script
from .connection import Connections, gone, scrub

T = TypeVar("T")

# run_in_transaction's commits do not wait for the WAL flush (see the module docstring)
ASYNC_COMMIT = "SET LOCAL synchronous_commit = off"

IDLE_IN_TRANSACTION_TIMEOUT = 60.0  # seconds; see PgDatabase.open


# --- SQL text and rows ------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def to_pg(statement: str) -> str:
    """``statement`` with ``?`` as ``%s`` except inside '…' literals, "…" names and --
    comments (the data layer's SQL is written for sqlite3), and every ``%`` doubled
    (psycopg reads placeholders in literals too)."""
    out: list[str] = []
    i, n = 0, len(statement)
    while i < n:
        ch = statement[i]
        if ch in "'\"":
            end = i + 1
            while True:
                end = statement.find(ch, end)
                if end < 0:
                    end = n
                    break
                if end + 1 < n and statement[end + 1] == ch:  # '' or "" escapes itself
                    end += 2
                    continue
                end += 1
                break
            out.append(statement[i:end].replace("%", "%%"))
            i = end
        elif ch == "-" and statement.startswith("--", i):
            end = statement.find("\n", i)
            end = n if end < 0 else end
            out.append(statement[i:end].replace("%", "%%"))
            i = end
        elif ch == "?":
            out.append("%s")
            i += 1
        elif ch == "%":
            out.append("%%")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_PLAIN_INSERT = re.compile(r"\s*(INSERT\s+INTO\s+[\w.]+\s*\([^()]*\)\s*VALUES)\s*(\(\s*\?(?:\s*,\s*\?)*\s*\))\s*;?\s*",
                           re.IGNORECASE)
MAX_BOUND = 30_000  # parameters per multi-row INSERT (PostgreSQL allows 65,535)


@functools.lru_cache(maxsize=256)
def _multi_row(statement: str) -> tuple[str, str, int] | None:
    """(head, one row's placeholders, columns) of a plain ``INSERT INTO t (…) VALUES (?, …)``
    (no RETURNING, no ON CONFLICT), else None."""
    match = _PLAIN_INSERT.fullmatch(statement)
    if match is None:
        return None
    return match.group(1).replace("%", "%%"), match.group(2).replace("?", "%s"), match.group(2).count("?")


def insert_many(cur: psycopg.Cursor[Any], statement: str, rows: Sequence[Params]) -> int:
    """``executemany`` for the data layer's SQL; returns the rows written. A plain INSERT
    goes out as multi-row ``VALUES`` of up to MAX_BOUND parameters (1.8x faster than a
    statement per row for a folder's children; row triggers still fire per row, in
    order), anything else through psycopg's executemany (pipelined)."""
    shape = _multi_row(statement)
    if shape is None or not rows or any(isinstance(r, dict) for r in rows):
        cur.executemany(to_pg(statement), rows)
        return cur.rowcount
    head, one, width = shape
    per = max(1, MAX_BOUND // width)
    written = 0
    for start in range(0, len(rows), per):
        part = rows[start : start + per]
        cur.execute(f"{head} {', '.join([one] * len(part))}", [value for row in part for value in row])
        written += cur.rowcount
    return written


class Row(tuple[Any, ...]):
    """A result row by index or by column name, as ``sqlite3.Row`` (and equal to the tuple
    of its values). One subclass per column list holds the names."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@functools.lru_cache(maxsize=512)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)  # the first of two same-named columns, as sqlite3.Row
    return type("Row", (Row,), {"__slots__": (), "_index": index})


def _rows(cursor: Any) -> Callable[[Sequence[Any]], Any]:
    description = cursor.description
    if description is None:
        return tuple
    return _row_class(tuple(d.name for d in description))


class _NulSafeText(StrDumperUnknown):
    def dump(self, obj: str) -> Any:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


class _NulSafeBinary(StrBinaryDumper):
    def dump(self, obj: str) -> Any:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


class PgDialect:
    name = "postgresql"

    def json_text(self, column: str, key: str) -> str:
        return f"({column}::json ->> '{key}')"

    def json_true(self, column: str, key: str) -> str:
        return f"({column}::json ->> '{key}') = 'true'"


POSTGRES = PgDialect()


# --- connections --------------------------------------------------------------------


class _PipelinedCursor:
    """A cursor of a pipelined transaction: fetching waits for its result (psycopg does),
    so does asking its rowcount (which psycopg would report as -1 until then)."""

    __slots__ = ("_cur", "_pipeline")

    def __init__(self, cur: psycopg.Cursor[Any], pipeline: psycopg.Pipeline):
        self._cur = cur
        self._pipeline = pipeline

    @property
    def rowcount(self) -> int:
        if self._cur.pgresult is None:
            self._pipeline.sync()
        return self._cur.rowcount

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur.fetchall())


class PgSyncConn:
    """What a `run_in_transaction` function gets: ``execute(sql, params)`` with ``?``
    placeholders, and ``raw``, the psycopg connection in its open transaction (a chunk
    write or a lease statement can join it)."""

    def __init__(self, raw: psycopg.Connection[Any], pipeline: psycopg.Pipeline | None = None):
        self.raw = raw
        self._pipeline = pipeline

    def execute(self, statement: str, parameters: Any = (), /) -> Any:
        cur = self.raw.execute(to_pg(statement), parameters if parameters is not None else ())
        return cur if self._pipeline is None else _PipelinedCursor(cur, self._pipeline)

    def executemany(self, statement: str, rows: Iterable[Params], /) -> int:
        """Returns how many rows were written."""
        with self.raw.cursor() as cur:
            return insert_many(cur, statement, list(rows))


class PgAsyncConn:
    """What `transaction()` and `read()` hand out: the statement helpers of
    core/sqlite_thread.AsyncConnection, one thread hop (and one round trip) each."""

    def __init__(self, db: PgDatabase):
        self._db = db

    def execute(self, statement: str, params: Params = ()) -> Pending:
        query = to_pg(statement)

        def run(con: psycopg.Connection[Any]) -> Result:
            cur = con.execute(query, params if params is not None else ())
            try:
                return Result(cur.fetchall() if cur.description is not None else [], cur.rowcount, None)
            finally:
                cur.close()

        return Pending(lambda: self._db._call(run))

    async def execute_fetchall(self, statement: str, params: Params = ()) -> list[Any]:
        return await (await self.execute(statement, params)).fetchall()

    async def executemany(self, statement: str, rows: Iterable[Params]) -> Result:
        batch = list(rows)

        def run(con: psycopg.Connection[Any]) -> Result:
            with con.cursor() as cur:
                return Result([], insert_many(cur, statement, batch), None)

        return await self._db._call(run)

    @property
    def in_transaction(self) -> bool:
        return self._db.in_transaction


class PgDatabase:
    """The catalogue in one PostgreSQL schema (see the module docstring)."""

    dialect: PgDialect = POSTGRES
    pipelined = True  # run_in_transaction in pipeline mode (False: a round trip per statement; benchmarks compare)

    def __init__(self, pool: Connections, idle_in_transaction_timeout: float = IDLE_IN_TRANSACTION_TIMEOUT):
        self._pool = pool
        self._idle_timeout_ms = max(1, round(idle_in_transaction_timeout * 1000))
        self.url = pool.url
        self.schema = pool.schema
        self._where = f"PostgreSQL catalogue {pool.where} (schema {pool.schema})"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ktui-catalogue-pg")
        self._con: psycopg.Connection[Any] | None = None
        self._key = 0
        self._lock_sql = ""
        self._lock = asyncio.Lock()
        self._async = PgAsyncConn(self)
        self._closed = False
        self._open_tx = False  # transaction() is between its BEGIN and its COMMIT / ROLLBACK

    @property
    def where(self) -> str:
        return self._where

    @classmethod
    async def open(
        cls, url: str, *, schema: str = "ktui", idle_in_transaction_timeout: float = IDLE_IN_TRANSACTION_TIMEOUT
    ) -> PgDatabase:
        """Connect, create the schema if needed and migrate it (under the catalogue lock).
        SchemaVersionError when a newer ktui wrote it; StoreError when the server cannot
        be reached or refuses (its message without credentials).

        `idle_in_transaction_timeout` (seconds): the server ends this connection's session
        when a transaction of it waits that long between statements, so a process that
        hangs or a machine that drops off the network mid-write cannot hold the catalogue
        lock (every process's writes) for as long as TCP takes to notice (hours)."""
        db = cls(Connections(url, schema, size=1), idle_in_transaction_timeout)
        try:
            await db._call(db._open)
        except BaseException:
            await db._shutdown()
            raise
        return db

    # --- the thread ---------------------------------------------------------------

    async def _call(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`fn(connection)` on the catalogue's thread; PostgreSQL failures mapped."""
        if self._closed:
            raise StoreError(f"{self._where} is closed")

        def run() -> T:
            return fn(self._usable())

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, run)
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def _usable(self) -> psycopg.Connection[Any]:
        """The connection; between transactions a new one if the server hung up on it
        (inside one, never: its statements must not go on elsewhere)."""
        con = self._con
        if self._open_tx:
            if con is None or con.closed or con.broken:
                raise StoreError(f"{self._where}: the connection was lost inside a transaction")
            return con
        if con is None or gone(con):
            if con is not None:
                con.close()
            self._con = None
            con = self._pool.connect()
            con.row_factory = _rows
            con.execute(f"SET idle_in_transaction_session_timeout = {self._idle_timeout_ms}")
            con.adapters.register_dumper(str, _NulSafeBinary)
            con.adapters.register_dumper(str, _NulSafeText)
            self._con = con
        elif con.info.transaction_status != TransactionStatus.IDLE:  # what a failed BEGIN may leave
            self._rollback_quietly(con)
            return self._usable()
        return con

    def _fault(self, exc: psycopg.Error) -> StoreError:
        detail = scrub(str(exc).strip() or type(exc).__name__, self.url)
        if isinstance(exc, psycopg.errors.IntegrityError):
            return ConstraintError(f"{self._where}: {detail}")
        return StoreError(f"{self._where}: {detail}")

    # --- opening and migrations -----------------------------------------------------

    def _open(self, con: psycopg.Connection[Any]) -> None:
        row = con.execute("SELECT hashtext(%s)", (f"ktui catalogue {self.schema}",)).fetchone()
        assert row is not None
        self._key = int(row[0])
        self._lock_sql = f"SELECT pg_advisory_xact_lock({self._key})"
        self._refuse_newer(self._version(con))  # before anything is written
        if self._version(con) < PG_SCHEMA_VERSION:
            self._migrate(con)

    def _version(self, con: psycopg.Connection[Any]) -> int:
        table = sql.Identifier(self.schema, VERSION_TABLE)
        exists = con.execute("SELECT to_regclass(%s)", (table.as_string(con),)).fetchone()
        if exists is None or exists[0] is None:
            return 0
        row = con.execute(sql.SQL("SELECT version FROM {}").format(table)).fetchone()
        return int(row[0]) if row else 0

    def _refuse_newer(self, version: int) -> None:
        if version > PG_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self._where} was written by a newer ktui (catalogue schema {version}, this version "
                f"understands up to {PG_SCHEMA_VERSION}); upgrade ktui to open it"
            )

    def _migrate(self, con: psycopg.Connection[Any]) -> None:
        """Every missing migration in one transaction under the catalogue lock: a second
        process opening the schema meanwhile waits, then finds it migrated."""
        table = sql.Identifier(self.schema, VERSION_TABLE)
        with con.transaction():
            con.execute(self._lock_sql)
            con.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one), "
                    "version INTEGER NOT NULL CHECK (version >= 0))"
                ).format(table)
            )
            con.execute(sql.SQL("INSERT INTO {} (version) VALUES (0) ON CONFLICT DO NOTHING").format(table))
            version = self._version(con)
            self._refuse_newer(version)
            ident = sql.Identifier(self.schema).as_string(con)
            for n in range(version, PG_SCHEMA_VERSION):
                con.execute(migration_script(n, ident).encode())  # several statements: no parameters
            con.execute(sql.SQL("UPDATE {} SET version = %s").format(table), (PG_SCHEMA_VERSION,))

    async def user_version(self) -> int:
        return await self._call(self._version)

    # --- transactions and reads ---------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        con = self._con
        return con is not None and not con.closed and con.info.transaction_status != TransactionStatus.IDLE

    def _begin(self, con: psycopg.Connection[Any]) -> None:
        con.execute(f"BEGIN; {self._lock_sql}".encode())  # one round trip
        self._open_tx = True

    def _commit(self, con: psycopg.Connection[Any]) -> None:
        self._open_tx = False
        con.execute("COMMIT")

    @staticmethod
    def _rollback_quietly(con: psycopg.Connection[Any]) -> None:
        """ROLLBACK if a transaction is still open; its failure never replaces the cause."""
        if con.closed or con.info.transaction_status == TransactionStatus.IDLE:
            return
        try:
            con.execute("ROLLBACK")
        except psycopg.Error:
            con.close()  # never reuse a connection in an unknown state

    async def _rollback(self) -> None:
        def run() -> None:
            self._open_tx = False
            if self._con is not None:
                self._rollback_quietly(self._con)

        await asyncio.get_running_loop().run_in_executor(self._executor, run)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgAsyncConn]:
        """BEGIN, the catalogue lock, … COMMIT; rolled back on any exception (cancellation too)."""
        async with self._lock:
            try:
                await self._call(self._begin)
                yield self._async
                await self._call(self._commit)
            except BaseException:
                await asyncio.shield(self._rollback())
                raise

    async def run_in_transaction(self, fn: Callable[[SyncConn], T]) -> T:
        """`fn(connection)` in one write transaction on the catalogue's thread, in one hop,
        pipelined (see the module docstring); commits or rolls back as a whole even if
        the caller is cancelled meanwhile."""

        def run(con: psycopg.Connection[Any]) -> T:
            try:
                if not self.pipelined:
                    con.execute(f"BEGIN; {self._lock_sql}; {ASYNC_COMMIT}".encode())
                    result = fn(PgSyncConn(con))
                    con.execute("COMMIT")
                    return result
                with con.pipeline() as pipeline:
                    con.execute("BEGIN")
                    con.execute(self._lock_sql)
                    con.execute(ASYNC_COMMIT)
                    result = fn(PgSyncConn(con, pipeline))
                    con.execute("COMMIT")
            except BaseException:
                self._rollback_quietly(con)
                raise
            return result

        async with self._lock:
            return await self._call(run)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[PgAsyncConn]:
        async with self._lock:
            yield self._async

    async def fetchall(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        async with self.read() as conn:
            return await conn.execute_fetchall(statement, params)

    async def fetchone(self, statement: str, params: Sequence[Any] = ()) -> Any:
        rows = await self.fetchall(statement, params)
        return rows[0] if rows else None

    async def close(self) -> None:
        if self._closed:
            return
        async with self._lock:
            await self._shutdown()

    async def _shutdown(self) -> None:
        self._closed = True
        con, self._con = self._con, None
        try:
            if con is not None:
                await asyncio.get_running_loop().run_in_executor(self._executor, con.close)
        finally:
            self._executor.shutdown(wait=False)

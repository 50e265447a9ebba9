"""One sqlite3 connection on its own thread, driven from asyncio.

sqlite3 calls block, so they must not run on the event loop; a connection is also
best used from one thread only. `ThreadConnection` owns a connection and a
single-worker executor: every call is a function handed to that thread, so calls
run one after another in submission order and a whole transaction can run there in
one hop (`call(fn)`), which is what the hot status writes need.

`AsyncConnection` adds the few statement-level helpers the catalogue's data
services use (`execute`, `execute_fetchall`, `executemany`), each one thread hop
that returns its rows fully fetched. It replaces aiosqlite, whose only way to run a
function on its thread was a private method.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

Params = Sequence[Any] | dict[str, Any]


class ThreadConnection:
    """A sqlite3 connection created on, and only ever used from, one worker thread."""

    def __init__(self, executor: ThreadPoolExecutor, conn: sqlite3.Connection):
        self._executor = executor
        self._conn: sqlite3.Connection | None = conn

    @classmethod
    async def open(cls, connect: Callable[[], sqlite3.Connection], *, name: str = "sqlite") -> ThreadConnection:
        """Start the thread and run `connect()` on it."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        try:
            conn = await asyncio.get_running_loop().run_in_executor(executor, connect)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(executor, conn)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` on the connection's thread.

        If the awaiting task is cancelled, `fn` still runs to its end on the thread
        (a transaction function therefore commits or rolls back as a whole)."""
        conn = self._conn
        if conn is None:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, conn)

    @property
    def in_transaction(self) -> bool:
        return self._conn is not None and self._conn.in_transaction

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, conn.close)
        finally:
            self._executor.shutdown(wait=False)


class Result:
    """What one statement produced: its rows (already fetched) and its rowcount."""

    __slots__ = ("_rows", "_next", "rowcount", "lastrowid")

    def __init__(self, rows: list[sqlite3.Row], rowcount: int, lastrowid: int | None):
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    async def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        row = self._rows[self._next]
        self._next += 1
        return row

    async def fetchall(self) -> list[Any]:
        rows = self._rows[self._next:]
        self._next = len(self._rows)
        return rows


class Pending:
    """`await conn.execute(...)` or `async with conn.execute(...) as cur:` alike."""

    __slots__ = ("_run",)

    def __init__(self, run: Callable[[], Any]):
        self._run = run

    def __await__(self) -> Generator[Any, None, Result]:
        result: Result = yield from self._run().__await__()
        return result

    async def __aenter__(self) -> Result:
        result: Result = await self._run()
        return result

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class AsyncConnection:
    """Statement-level async access to a `ThreadConnection` (one hop per statement)."""

    def __init__(self, thread: ThreadConnection):
        self.thread = thread

    @classmethod
    async def connect(
        cls, path: Path | str, *, name: str = "sqlite", timeout: float = 5.0, uri: bool = False
    ) -> AsyncConnection:
        """Autocommit mode (`isolation_level=None`): transactions are explicit BEGIN … COMMIT.
        `uri`: `path` is a `file:` URI (a reader's `?mode=ro`)."""

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, isolation_level=None, timeout=timeout, uri=uri)
            conn.row_factory = sqlite3.Row
            return conn

        return cls(await ThreadConnection.open(connect, name=name))

    def execute(self, sql: str, params: Params = ()) -> Pending:
        def run(conn: sqlite3.Connection) -> Result:
            cur = conn.execute(sql, params)
            try:
                return Result(cur.fetchall(), cur.rowcount, cur.lastrowid)
            finally:
                cur.close()

        return Pending(lambda: self.thread.call(run))

    async def execute_fetchall(self, sql: str, params: Params = ()) -> list[Any]:
        return await (await self.execute(sql, params)).fetchall()

    async def executemany(self, sql: str, rows: Iterable[Params]) -> Result:
        batch = list(rows)

        def run(conn: sqlite3.Connection) -> Result:
            cur = conn.executemany(sql, batch)
            try:
                return Result([], cur.rowcount, cur.lastrowid)
            finally:
                cur.close()

        return await self.thread.call(run)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self.thread.call(fn)

    @property
    def in_transaction(self) -> bool:
        return self.thread.in_transaction

    async def close(self) -> None:
        await self.thread.close()

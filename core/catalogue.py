"""What the data layer needs of a catalogue database, whichever engine holds it.

Two implementations: :class:`ktui.core.db.Database` (SQLite, the default) and
``ktui.core.store.postgres.catalogue.PgDatabase`` (PostgreSQL, imported only when a
``postgresql://`` URL is opened, so SQLite users never import psycopg).

The data layer's SQL is one text for both: the subset the two engines share, with
``?`` placeholders (PostgreSQL's connections translate them outside string literals).
Where the subset is not enough, the statement asks the catalogue's :class:`Dialect`
for the fragment (JSON fields of an item's ``data``). Connections hand out rows that
read by name and by index (``sqlite3.Row`` on SQLite, an equivalent tuple on
PostgreSQL); a rule of the schema that refuses a row raises
:class:`ktui.core.errors.ConstraintError` on both.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

Params = Sequence[Any] | dict[str, Any]


class Result(Protocol):
    """What one statement of an async connection produced (rows already fetched)."""

    @property
    def rowcount(self) -> int: ...

    async def fetchone(self) -> Any: ...

    async def fetchall(self) -> list[Any]: ...


class Statement(Protocol):
    """``await conn.execute(...)`` or ``async with conn.execute(...) as cur:`` alike."""

    def __await__(self) -> Generator[Any, None, Result]: ...

    async def __aenter__(self) -> Result: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class AsyncConn(Protocol):
    """The connection `transaction()` and `read()` hand out: one hop per statement."""

    def execute(self, sql: str, params: Params = ()) -> Statement: ...

    async def execute_fetchall(self, sql: str, params: Params = ()) -> list[Any]: ...

    async def executemany(self, sql: str, rows: Iterable[Params]) -> Result: ...

    @property
    def in_transaction(self) -> bool: ...


class SyncCursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SyncConn(Protocol):
    """The connection a `run_in_transaction` function gets, on the database's own thread
    (a ``sqlite3.Connection`` on SQLite)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> SyncCursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> object:
        """Many rows of one statement (on PostgreSQL multi-row ``VALUES``, as `AsyncConn`'s)."""
        ...


WriteGuard = Callable[[SyncConn, list[str]], list[str]]
"""Called first inside a completion or failure write's transaction with the items it is
about to write; returns those it may write (core/runtime/claims.py: the ones this
process still holds on a shared catalogue). The write leaves the others out."""


class Dialect(Protocol):
    """SQL fragments the two engines spell differently."""

    name: str

    def json_text(self, column: str, key: str) -> str:
        """The value of a top-level key of a JSON text column, as SQL text or NULL when
        absent or JSON null (a JSON true reads as ``json_true``'s spelling)."""
        ...

    def json_true(self, column: str, key: str) -> str:
        """A condition: the JSON text column's top-level key holds ``true``."""
        ...


class SqliteDialect:
    name = "sqlite"

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def json_true(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}') = 1"


SQLITE = SqliteDialect()


class Catalogue(Protocol):
    """The catalogue database: every reader and writer of core/data goes through this."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def where(self) -> str:
        """How messages name it: a file path, or a PostgreSQL server without credentials."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[AsyncConn]:
        """A write transaction (serialised with every other writer of the catalogue),
        rolled back on any exception including cancellation."""
        ...

    def read(self) -> AbstractAsyncContextManager[AsyncConn]: ...

    async def run_in_transaction(self, fn: Callable[[SyncConn], T]) -> T:
        """``fn(connection)`` inside one write transaction on the database's own thread, in
        one hop; it commits or rolls back as a whole even if the caller is cancelled."""
        ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    async def user_version(self) -> int: ...

    async def close(self) -> None: ...


async def open_catalogue(data_dir: Path, url: str | None = None, *, schema: str = "ktui") -> Catalogue:
    """The catalogue of a data directory: its `knowledge.db`, or the PostgreSQL schema
    `schema` at `url` (the postgres modules are imported only then)."""
    if url is None:
        from ktui.core.db import Database

        return await Database.open(data_dir)
    from ktui.core.store.postgres.catalogue import PgDatabase

    return await PgDatabase.open(url, schema=schema)

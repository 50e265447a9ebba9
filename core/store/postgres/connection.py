"""Connections to one PostgreSQL database for the chunk stores, and what errors may say.

:class:`Connections` is a small thread-safe pool (at most ``size`` connections, made on
demand, each in autocommit mode with the vector type registered and the store's schema
first on its ``search_path``; an idle one the server has hung up on is replaced before
use). :func:`redact` is the one way a server is named in a
message or a log line: user, host, port and database, never the password or any other
connection parameter (TLS key paths and passwords included).
"""

from __future__ import annotations

import logging
import re
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ktui.core.errors import StoreError

log = logging.getLogger(__name__)

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
CONNECT_TIMEOUT = 10  # seconds, unless the URL says otherwise


def redact(url: str) -> str:
    """``postgresql://user@host:port/dbname`` for ``url``: enough to tell servers apart, no secret."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(unparsable URL)"
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or "")
    if host.startswith("/"):
        host = f"[socket {host}]"
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{params.get('dbname') or ''}"


def scrub(message: str, url: str) -> str:
    """``message`` with every secret of ``url`` (password, and the URL itself) replaced by ***."""
    secrets = [url]
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        params = {}
    secrets += [str(v) for k, v in params.items() if "password" in k and v]
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            message = message.replace(secret, "***")
    return message


def gone(con: psycopg.Connection[Any]) -> bool:
    """True when an idle connection can no longer be used: closed, or the server has
    written to it while it sat idle, which (no LISTEN is ever issued on these) means it
    hung up: a restart, an administrator's pg_terminate_backend, an idle timeout. Checked
    without a round trip, so a server that went away costs no failed call."""
    if con.closed or con.broken:
        return True
    try:
        readable, _, _ = select.select([con.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Connections:
    """A small pool of connections to one database (see the module docstring)."""

    def __init__(self, url: str, schema: str, size: int = 4):
        if not SCHEMA_NAME.match(schema):
            raise StoreError(f"PostgreSQL schema name {schema!r}: use lower-case letters, digits and _ (at most 63)")
        self.url = url
        self.where = redact(url)
        self.schema = schema
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._search_path: sql.Composable | None = None

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection outside the pool (the caller closes it), set up like the pool's."""
        return self._connect()

    def _connect(self) -> psycopg.Connection[Any]:
        kwargs: dict[str, Any] = {}
        if "connect_timeout" not in conninfo_to_dict(self.url):
            kwargs["connect_timeout"] = CONNECT_TIMEOUT
        con = psycopg.connect(self.url, autocommit=True, **kwargs)
        try:
            if self._search_path is None:
                self._search_path = self._prepare(con)
            con.execute(sql.SQL("SET search_path TO {}").format(self._search_path))
            register_vector(con)
        except BaseException:
            con.close()
            raise
        return con

    def _prepare(self, con: psycopg.Connection[Any]) -> sql.Composable:
        """Make sure pgvector and the schema exist; the search path: the schema, then pgvector's."""
        row = con.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        ).fetchone()
        if row is None:
            try:
                con.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise StoreError(
                    f"PostgreSQL store {self.where}: the pgvector extension is not installed in this database "
                    f"and could not be created ({scrub(str(exc).strip(), self.url)}); "
                    "ask its administrator to run CREATE EXTENSION vector"
                ) from exc
            row = con.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                "WHERE e.extname = 'vector'"
            ).fetchone()
        assert row is not None
        with con.transaction():
            # two processes creating the schema at once would collide on pg_namespace's unique key
            con.execute("SELECT pg_advisory_xact_lock(hashtext('ktui schema ' || %s))", (self.schema,))
            con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
        names = [self.schema] if row[0] == self.schema else [self.schema, str(row[0])]
        return sql.SQL(", ").join(sql.Identifier(n) for n in names)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one job (waits while all ``size`` are in use)."""
        self._slots.acquire()
        try:
            with self._lock:
                if self._closed:
                    raise StoreError(f"PostgreSQL store {self.where} is closed")
                con = self._idle.pop() if self._idle else None
            if con is not None and gone(con):
                con.close()
                con = None
            if con is None:
                con = self._connect()
            try:
                yield con
            except BaseException:
                if not con.closed and con.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    con.close()  # never hand on a connection in an unknown state
                self._give_back(con)
                raise
            self._give_back(con)
        finally:
            self._slots.release()

    def _give_back(self, con: psycopg.Connection[Any]) -> None:
        if con.closed or con.broken:
            return
        with self._lock:
            if not self._closed:
                self._idle.append(con)
                return
        con.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for con in idle:
            con.close()

"""A real PostgreSQL 16 with pgvector for the tests, started from the `pgserver` wheel.

One server per test process (so per pytest-xdist worker), in a private folder of its own
under the system's temporary directory, listening on a Unix socket only; it is started the first time a test asks for
it and stopped (its data directory deleted) at the end of the session. Each test gets a
schema of its own (`fresh_schema`), dropped afterwards, so tests never see each other's
tables. The `vector` extension is created once per server in `public`.

Why not under pytest's `tmp_path_factory`: run as root, pgserver starts PostgreSQL as
an unprivileged user and opens the folders above its data directory to it, but every
pytest session (a concurrent one included) makes `/tmp/pytest-of-<user>` private again,
which pulled the ground from under a server being initialised.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql


@contextmanager
def running_server() -> Iterator[PostgresServer]:
    """A server in a fresh temporary folder, stopped and deleted afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="ktui-pg-"))
    try:
        server = PostgresServer(folder / "data")
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class PostgresServer:
    """A running pgserver instance: its URL and a way to stop it."""

    def __init__(self, data_dir: Path):
        import pgserver  # the test extra's wheel; imported here so a plain import of this module is cheap

        self._server = pgserver.get_server(data_dir, cleanup_mode="delete")
        self.url: str = self._server.get_uri()
        with psycopg.connect(self.url, autocommit=True) as con:
            con.execute("CREATE EXTENSION IF NOT EXISTS vector")

    @property
    def pid(self) -> int | None:
        return self._server.get_pid()

    @contextmanager
    def schema(self) -> Iterator[str]:
        """A new, empty schema (dropped with everything in it afterwards)."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        try:
            yield name
        finally:
            with psycopg.connect(self.url, autocommit=True) as con:
                con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))

    def stop(self) -> None:
        self._server.cleanup()

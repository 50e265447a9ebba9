"""PgWorkClaims: the runtime's work claims (core/runtime/claims.py) on PostgreSQL leases.

Several processes index one catalogue: an item's task runs where its lease is
(core/store/postgres/leases.py). Claims, renewals, sweeps and releases go through a
small pool of autocommit connections of this object's own, each call on a thread (they
are single statements, never inside the catalogue's transactions, so they never wait
for the catalogue's writer lock). The completion guard runs inside the catalogue's
write transaction, on its connection (``PgSyncConn.raw``): the lease's DELETE, the
item's completed / failed row and (``completing``) the leaf's chunks commit together, or
none does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg

from ktui.core.catalogue import SyncConn, WriteGuard
from ktui.core.errors import StoreError
from ktui.core.models import Chunk

from . import process_leases
from .catalogue import PgSyncConn
from .connection import Connections, scrub
from .leases import ANY_STATUS, CLAIMABLE, SWEEP_LIMIT, Leases
from .notify import ORIGIN_SETTING, channel_for

T = TypeVar("T")

# seconds: one cheap statement a second from each process with a free worker, for work
# nobody announced (an idle process sweeps at once when another one adds items: heartbeat.py)
IDLE_SWEEP_EVERY = 1.0


_RELEASED = (f"SELECT pg_notify(%s, json_build_object('o', current_setting('{ORIGIN_SETTING}', true), "
             "'k', 'rel', 'b', '')::text)")


class PgWorkClaims:
    """Work claims of one runtime over the leases of one catalogue schema."""

    shared = True

    def __init__(self, url: str, schema: str, *, leases: Leases | None = None, pool_size: int = 2,
                 heartbeat_every: float | None = None, idle_sweep_every: float | None = None):
        self.leases = leases or Leases()
        self._heartbeat_every = heartbeat_every  # None: a third of the leases' TTL
        # None: the module's IDLE_SWEEP_EVERY, read now (a test of the facade sets it first)
        self.idle_sweep_every = IDLE_SWEEP_EVERY if idle_sweep_every is None else idle_sweep_every
        self._pool = Connections(url, schema, pool_size)
        self._where = f"PostgreSQL catalogue {self._pool.where} (schema {schema})"
        self._channel = channel_for(schema)

    @property
    def heartbeat_every(self) -> float:
        return self._heartbeat_every if self._heartbeat_every is not None else self.leases.heartbeat_every

    @property
    def guard(self) -> Callable[[SyncConn, list[str]], list[str]]:
        return self._guard

    def _guard(self, conn: SyncConn, item_ids: list[str]) -> list[str]:
        if not isinstance(conn, PgSyncConn):
            raise TypeError("PostgreSQL work claims guard writes of a PostgreSQL catalogue only")
        return self.leases.take_back(conn.raw, item_ids)

    @property
    def holding(self) -> Callable[[SyncConn, list[str]], list[str]]:
        return self._holding

    def _holding(self, conn: SyncConn, item_ids: list[str]) -> list[str]:
        """A phase write's guard: the items still held, locked until the write commits (no
        takeover in between), their leases kept."""
        if not isinstance(conn, PgSyncConn):
            raise TypeError("PostgreSQL work claims guard writes of a PostgreSQL catalogue only")
        return self.leases.lock_held(conn.raw, item_ids)

    def completing(self, store: Any, entries: Sequence[tuple[str, Sequence[Chunk], np.ndarray]]) -> WriteGuard:
        """Take the leases back, then write the held leaves' chunks into the same
        transaction (``PgBaseStore.replace_items(con=)``, a savepoint of it)."""
        by_item = {e[0]: e for e in entries}

        def guard(conn: SyncConn, item_ids: list[str]) -> list[str]:
            held = self._guard(conn, item_ids)
            if held:
                assert isinstance(conn, PgSyncConn)  # checked by _guard
                store.replace_items([by_item[i] for i in held if i in by_item], con=conn.raw)
            return held

        return guard

    def failing(self, store: Any, item_ids: Sequence[str]) -> WriteGuard:
        """Take the leases back, then remove the held items' vectors in the same transaction
        (``PgBaseStore.delete_items(con=)``, a savepoint of it): the failure row, the
        removal and the release commit together, or none does."""

        def guard(conn: SyncConn, ids: list[str]) -> list[str]:
            held = self._guard(conn, ids)
            if held:
                assert isinstance(conn, PgSyncConn)  # checked by _guard
                store.delete_items(held, con=conn.raw)
            return held

        return guard

    def holding_container(self, item_id: str, *, store: Any = None, vectors_of: Sequence[str] = ()) -> WriteGuard:
        """Lock the container's row and its lease (``Leases.lock_held``); all of `ids` while
        it is held, else none. Two statements on one row each, whatever the write's size
        (locking the touched rows first as well added ~10 % to a 20,000-row reindex write,
        tests/benchmarks/test_bench_pg_container_guard.py, and buys nothing: catalogue
        writers run one at a time under the catalogue lock, and a reset's seize locks in
        id order, so the container before its own time-ordered children). With `store`, the removed children's vectors
        in a savepoint of the same transaction."""
        doomed = list(vectors_of)

        def guard(conn: SyncConn, ids: list[str]) -> list[str]:
            if not isinstance(conn, PgSyncConn):
                raise TypeError("PostgreSQL work claims guard writes of a PostgreSQL catalogue only")
            if not self.leases.lock_held(conn.raw, [item_id]):
                return []
            if store is not None and doomed:
                store.delete_items(doomed, con=conn.raw)
            return list(ids)

        return guard

    async def _run(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        def run() -> T:
            with self._pool.connection() as con:
                return fn(con)

        try:
            return await asyncio.to_thread(run)
        except psycopg.Error as exc:
            detail = scrub(str(exc).strip() or type(exc).__name__, self._pool.url)
            raise StoreError(f"{self._where}: could not {what}: {detail}") from exc

    async def claim(self, item_ids: Sequence[str], *, any_status: bool = False) -> list[str]:
        ids = list(item_ids)
        statuses = ANY_STATUS if any_status else CLAIMABLE
        return await self._run("claim items", lambda con: self.leases.claim(con, ids, statuses=statuses)) if ids else []

    async def release(self, item_ids: Sequence[str]) -> None:
        ids = list(item_ids)
        if ids:
            await self._run("release items", lambda con: self.leases.release(con, ids))

    async def seize(self, item_ids: Sequence[str]) -> list[str]:
        ids = list(item_ids)
        if not ids:
            return []
        return await self._run("take items over", lambda con: self.leases.seize(con, ids, channel=self._channel))

    async def held(self, item_ids: Sequence[str]) -> list[str]:
        ids = list(item_ids)
        return await self._run("look up claims", lambda con: self.leases.held(con, ids)) if ids else []

    async def beat(self, limit: int, *, containers: int = 0) -> list[str]:
        def run(con: psycopg.Connection[Any]) -> list[str]:
            self.leases.renew(con)
            found = self.leases.sweep(con, min(containers, SWEEP_LIMIT), containers=True) if containers > 0 else []
            return found + (self.leases.sweep(con, min(limit, SWEEP_LIMIT), containers=False) if limit > 0 else [])

        return await self._run("renew claims", run)

    # --- imports in flight and followed folders (process_leases.py; core/runtime/following.py)

    @property
    def host(self) -> str:
        """This process's machine, as its owner id names it."""
        return process_leases.host_of(self.leases.owner)

    async def interrupted_imports(self) -> list[str]:
        return await self._run("take over interrupted imports",
                               lambda con: process_leases.take_interrupted_imports(con, self.leases))

    async def give_back_imports(self, base_ids: Sequence[str]) -> None:
        ids = list(base_ids)
        await self._run("give back imports", lambda con: process_leases.give_back_imports(con, self.leases, ids))

    async def renew_own(self) -> list[str]:
        return await self._run("renew import and folder leases", lambda con: process_leases.renew(con, self.leases))

    async def record_folders(self, item_ids: Sequence[str]) -> None:
        ids = list(item_ids)
        await self._run("record watched folders", lambda con: process_leases.record_host(con, ids, self.host))

    async def forget_folders(self, item_ids: Sequence[str]) -> None:
        ids = list(item_ids)
        await self._run("forget watched folders", lambda con: process_leases.forget(con, ids))

    async def take_folders(self, item_ids: Sequence[str]) -> list[str]:
        ids = list(item_ids)
        return await self._run("follow folders", lambda con: process_leases.take_folders(con, self.leases, ids))

    async def release_folders(self, item_ids: Sequence[str] | None = None) -> None:
        ids = None if item_ids is None else list(item_ids)
        await self._run("release folders", lambda con: process_leases.release_folders(con, self.leases, ids))

    async def followers(self, item_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
        ids = list(item_ids)
        rows = await self._run("read folder followers", lambda con: process_leases.followers(con, self.leases, ids))
        return {i: (f.host, f.owner) for i, f in rows.items()}

    async def close(self) -> None:
        def release(con: psycopg.Connection[Any]) -> None:
            self.leases.release(con)
            process_leases.release_folders(con, self.leases)
            # "claims given back" (here, or by the tasks the close interrupted, each its
            # own): a sweeping process takes them at once. A folder a one-shot `ktui add`
            # started preparing waited for the next containers' sweep, up to a third of the
            # lease TTL (heartbeat.offers_work). Once per process: cheap for everyone.
            con.execute(_RELEASED, (self._channel,))

        try:
            await self._run("release claims", release)
        finally:
            self._pool.close()

"""Leases on items: several indexers share one queue in PostgreSQL, and none indexes twice.

On SQLite one process holds the data directory and its in-memory queue is the only
queue. On PostgreSQL every process (the TUI, ``ktui watch`` and ``ktui serve`` on
several machines) may index, so an item is worked on only by the runtime that holds
its **lease**: a row of ``item_lease`` (item, owner, expiry). A runtime

* **claims** an item before it queues it (:meth:`Leases.claim`): free, expired, or
  already its own; anyone else's live lease wins and the item is not queued here;
* **renews** all of its leases in one statement every ``ttl / 3`` (:meth:`Leases.renew`:
  one UPDATE whatever the number of items, so a runtime with 10,000 items queued costs
  the server what one with one item costs);
* **sweeps** (:meth:`Leases.sweep`): claims up to ``limit`` items that are `processing`
  but leased by nobody alive (a SIGKILLed or partitioned worker's items, whose leases
  expired; items left by a crash). This is recovery on PostgreSQL: periodic, in
  every runtime, instead of once at open in the lock holder. ``FOR NO KEY UPDATE SKIP
  LOCKED`` lets several sweepers take different items instead of queueing behind each
  other on the same ones;
* **completes** under the lease (:meth:`Leases.take_back`, inside the catalogue
  transaction that writes the completion or failure: ``PgWorkClaims``' guard,
  work_claims.py): ``DELETE FROM item_lease WHERE item_id = … AND owner = me`` and the
  caller's write of exactly the items still held commit together. A worker that lost
  its lease (it stalled past the expiry and another runtime took the item over) deletes
  zero rows, so its result is never written: the new owner's is. An expired lease
  nobody took over is still the owner's (nobody else did the work), so it completes.

**Time.** Expiry compares ``expires_at`` (epoch seconds) with *now*. By default now is
the database server's clock (``statement_timestamp()``: one time source for every
machine, so a laptop whose clock is a minute off neither steals live leases nor keeps
dead ones; stable within a statement). A ``clock`` callable (returning epoch seconds)
replaces it: tests advance a fake clock instead of sleeping through a TTL.

**Locks.** Every operation that touches both tables locks the item row before the
lease row (claim ``FOR SHARE``, sweep ``FOR NO KEY UPDATE SKIP LOCKED``, take-back ``FOR
NO KEY UPDATE``), so the three never deadlock one another; a claim or a sweep waits
for a completion in flight and then sees the item is no longer `processing`. A
statement that still loses a deadlock (a renewal and a takeover crossing on many rows)
is retried.

The table is a catalogue migration (``LEASE_MIGRATION``, in
``catalogue_schema.PG_MIGRATIONS``). The functions take a psycopg connection with the
catalogue's schema on its search path: autocommit (each call its own transaction), or
the raw connection of a catalogue write transaction (``SyncConn.raw``), whose statements
they join; none of them opens a transaction of its own (psycopg's ``transaction()`` on
that pipelined connection can read it as idle and COMMIT the caller's early, see
``_atomic`` in store.py).
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NewType

import psycopg
from psycopg import errors as pg_errors

from ktui.core.models import CONTAINER_TYPES

from .notify import ORIGIN_SETTING

LeaseOwner = NewType("LeaseOwner", str)
"""Who holds a lease: ``<host>:<pid>:<random>``, one per runtime (a restarted process on
the same host with a reused pid is still someone else)."""

Clock = Callable[[], float]
"""Now, in epoch seconds."""

LEASE_TTL = 30.0  # seconds a lease lives without a renewal
HEARTBEAT_EVERY = LEASE_TTL / 3  # two missed beats still leave a live lease
SWEEP_LIMIT = 100  # items a sweep takes at once: enough to keep a queue fed, few enough to share
CLAIMABLE = ("processing",)  # statuses an item is swept (and by default claimed) in: queued or running
ANY_STATUS = ("idle", "processing", "completed", "failed")  # e.g. a folder refreshed while it stays completed
RETRIES = 3  # a statement that lost a deadlock is run again this many times

LEASE_TABLE = "item_lease"

# The catalogue migration that adds the table (appended to catalogue_schema.PG_MIGRATIONS).
LEASE_MIGRATION = f"""
-- item leases (core/store/postgres/leases.py): who works on an item, until when
CREATE TABLE {LEASE_TABLE} (
    item_id     TEXT PRIMARY KEY REFERENCES knowledge_item(id) ON DELETE CASCADE,
    owner       TEXT NOT NULL CHECK (length(owner) > 0),
    expires_at  DOUBLE PRECISION NOT NULL
);
-- the heartbeat's and release's `WHERE owner = $me`
CREATE INDEX {LEASE_TABLE}_owner ON {LEASE_TABLE} (owner);
"""

# Now, as SQL: the injected clock's value, else the server's clock. statement_timestamp()
# rather than clock_timestamp(): the same value everywhere in one statement.
_NOW = "COALESCE(%(now)s::float8, extract(epoch FROM statement_timestamp())::float8)"

_CLAIM = f"""
INSERT INTO {LEASE_TABLE} (item_id, owner, expires_at)
SELECT k.id, %(owner)s, {_NOW} + %(ttl)s
  FROM knowledge_item k
 WHERE k.id = ANY(%(ids)s) AND k.status = ANY(%(statuses)s)
   FOR SHARE OF k
ON CONFLICT (item_id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
 WHERE {LEASE_TABLE}.expires_at < {_NOW} OR {LEASE_TABLE}.owner = EXCLUDED.owner
RETURNING item_id"""

_SWEEP = f"""
WITH candidates AS (
    SELECT k.id
      FROM knowledge_item k
     WHERE k.status = ANY(%(statuses)s)
       AND (%(containers)s::boolean IS NULL OR (k.type = ANY(%(container_types)s)) = %(containers)s)
       AND NOT EXISTS (SELECT 1 FROM {LEASE_TABLE} l WHERE l.item_id = k.id AND l.expires_at >= {_NOW})
     LIMIT %(limit)s
       FOR NO KEY UPDATE OF k SKIP LOCKED
)
INSERT INTO {LEASE_TABLE} (item_id, owner, expires_at)
SELECT c.id, %(owner)s, {_NOW} + %(ttl)s FROM candidates c
ON CONFLICT (item_id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
 WHERE {LEASE_TABLE}.expires_at < {_NOW}
RETURNING item_id"""

_RENEW = f"UPDATE {LEASE_TABLE} SET expires_at = {_NOW} + %(ttl)s WHERE owner = %(owner)s"
_RELEASE_ALL = f"DELETE FROM {LEASE_TABLE} WHERE owner = %(owner)s"
_RELEASE = f"DELETE FROM {LEASE_TABLE} WHERE owner = %(owner)s AND item_id = ANY(%(ids)s)"
_LOCK_ITEMS = "SELECT id FROM knowledge_item WHERE id = ANY(%(ids)s) ORDER BY id FOR NO KEY UPDATE"
_TAKE_BACK = f"DELETE FROM {LEASE_TABLE} WHERE owner = %(owner)s AND item_id = ANY(%(ids)s) RETURNING item_id"
_HELD = f"""SELECT item_id FROM {LEASE_TABLE} WHERE owner = %(owner)s AND item_id = ANY(%(ids)s)
 ORDER BY item_id FOR UPDATE"""
# A reset (delete, reindex) takes its items' leases from whoever holds them, waiting for a
# completion in flight (items locked first, in id order, as everywhere), and tells the other
# processes which items it took (kind ``ls``), so a task running there for them stops.
_SEIZE = f"""
WITH seized AS (
    INSERT INTO {LEASE_TABLE} (item_id, owner, expires_at)
    SELECT k.id, %(owner)s, {_NOW} + %(ttl)s
      FROM knowledge_item k
     WHERE k.id = ANY(%(ids)s)
     ORDER BY k.id
       FOR NO KEY UPDATE OF k
    ON CONFLICT (item_id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
    RETURNING item_id
)
SELECT s.item_id, CASE WHEN %(channel)s::text IS NULL THEN NULL ELSE pg_notify(%(channel)s::text, json_build_object(
           'o', current_setting('{ORIGIN_SETTING}', true), 'k', 'ls', 'b', k.base_id, 'i', s.item_id)::text) END
  FROM seized s JOIN knowledge_item k ON k.id = s.item_id"""
_HELD_NOW = f"SELECT item_id FROM {LEASE_TABLE} WHERE owner = %(owner)s AND item_id = ANY(%(ids)s)"
_HOLDERS = f"SELECT item_id, owner, expires_at FROM {LEASE_TABLE} WHERE item_id = ANY(%(ids)s)"


def new_owner() -> LeaseOwner:
    """A fresh owner id for one runtime: ``<host>:<pid>:<8 hex digits>``."""
    return LeaseOwner(f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}")


@dataclass(frozen=True)
class Holder:
    """Who holds an item's lease, and until when (epoch seconds)."""

    owner: str
    expires_at: float


class Leases:
    """The lease operations of one owner (see the module docstring). Stateless apart from
    its owner, TTL and clock: any number of threads may use one, each with its own
    connection."""

    def __init__(self, owner: LeaseOwner | None = None, *, ttl: float = LEASE_TTL, clock: Clock | None = None):
        if ttl <= 0:
            raise ValueError("a lease lives for a positive time")
        self.owner: LeaseOwner = owner or new_owner()
        self.ttl = ttl
        self.clock = clock

    @property
    def heartbeat_every(self) -> float:
        """How often the owner should renew: a third of the TTL."""
        return self.ttl / 3

    def _params(self, **extra: Any) -> dict[str, Any]:
        return {"owner": self.owner, "ttl": self.ttl, "now": self.clock() if self.clock else None, **extra}

    def _retrying(self, con: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> psycopg.Cursor[Any]:
        for attempt in range(RETRIES + 1):
            try:
                return con.execute(query, params)
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure):
                if attempt == RETRIES or not con.autocommit or con.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    raise  # inside the caller's transaction: theirs to retry
        raise AssertionError("unreachable")

    def claim(
        self, con: psycopg.Connection[Any], item_ids: Sequence[str], *, statuses: Sequence[str] = CLAIMABLE
    ) -> list[str]:
        """Take the leases of these items where they are free, expired or already ours
        (ours are renewed) and the item is in one of `statuses`; returns those taken, in
        the order given. An item someone else holds, a deleted one, one that completed
        meanwhile, is left out: the caller does not queue it."""
        ids = list(dict.fromkeys(item_ids))  # ON CONFLICT cannot touch a row twice in one statement
        if not ids:
            return []
        taken = {r[0] for r in self._retrying(con, _CLAIM, self._params(ids=ids, statuses=list(statuses)))}
        return [i for i in ids if i in taken]

    def sweep(
        self, con: psycopg.Connection[Any], limit: int = SWEEP_LIMIT, *, statuses: Sequence[str] = CLAIMABLE,
        containers: bool | None = None,
    ) -> list[str]:
        """Claim up to `limit` items in `statuses` that nobody alive holds: never leased
        (left by a crash, or made `processing` by a runtime that has not claimed them
        yet) or whose lease expired. Items another sweep is taking right now are skipped,
        not waited for. `containers`: only folders and sitemaps (True), only leaves
        (False), either (None). A runtime sweeps leaves by the handful it can start and
        containers apart: a folder waiting on its children stays `processing` and
        unleased, so a small mixed sweep could return the same waiting folders every
        time and never reach a leaf."""
        if limit <= 0:
            return []
        params = self._params(limit=limit, statuses=list(statuses), containers=containers,
                              container_types=sorted(t.value for t in CONTAINER_TYPES))
        rows = self._retrying(con, _SWEEP, params)
        return [r[0] for r in rows]

    def renew(self, con: psycopg.Connection[Any]) -> int:
        """Push every lease of this owner to now + TTL, in one statement; returns how many
        it holds. A lease that expired but was not taken over is renewed too (still ours)."""
        return self._retrying(con, _RENEW, self._params()).rowcount

    def release(self, con: psycopg.Connection[Any], item_ids: Sequence[str] | None = None) -> int:
        """Give up these leases (all of the owner's when None) without completing: the item
        is free for the next sweep at once (an interrupted task, a runtime closing)."""
        if item_ids is None:
            return self._retrying(con, _RELEASE_ALL, self._params()).rowcount
        ids = list(dict.fromkeys(item_ids))
        return self._retrying(con, _RELEASE, self._params(ids=ids)).rowcount if ids else 0

    def take_back(self, con: psycopg.Connection[Any], item_ids: Sequence[str]) -> list[str]:
        """Inside the caller's transaction (the catalogue write that completes or fails
        these items): lock the items, delete this owner's leases of them, and return the
        ids it held, sorted. The caller writes only those; if its transaction rolls back,
        the leases are back too."""
        ids = sorted(set(item_ids))
        if not ids:
            return []
        params = self._params(ids=ids)
        con.execute(_LOCK_ITEMS, params)
        gone = {r[0] for r in con.execute(_TAKE_BACK, params).fetchall()}  # fetchall: syncs a pipeline
        return [i for i in ids if i in gone]

    def lock_held(self, con: psycopg.Connection[Any], item_ids: Sequence[str]) -> list[str]:
        """Inside the caller's transaction: lock these items and this owner's leases of them,
        and return those it holds. A takeover (claim or sweep) cannot happen until that
        transaction ends, so a write guarded by it (an item's chunks) can never land
        after the new owner's."""
        ids = sorted(set(item_ids))
        if not ids:
            return []
        params = self._params(ids=ids)
        con.execute(_LOCK_ITEMS, params)  # items before leases, the order every operation locks in
        return [r[0] for r in con.execute(_HELD, params).fetchall()]

    def seize(self, con: psycopg.Connection[Any], item_ids: Sequence[str], *, channel: str | None = None) -> list[str]:
        """Take these items' leases whoever holds them, whatever their status (a delete or a
        reindex of them starts here): another owner's completion or phase write is refused
        from now on, and no sweep takes them while this owner lives. With `channel`, a
        ``ls`` notification per item tells the other processes to stop their task for it
        (core/runtime/remote_interrupts.py). Returns the items that exist, sorted."""
        ids = sorted(set(item_ids))
        if not ids:
            return []
        rows = self._retrying(con, _SEIZE, self._params(ids=ids, channel=channel)).fetchall()
        return sorted(r[0] for r in rows)

    def held(self, con: psycopg.Connection[Any], item_ids: Sequence[str]) -> list[str]:
        """Which of these items this owner holds (expired or not: nobody took it over), no lock."""
        ids = list(dict.fromkeys(item_ids))
        if not ids:
            return []
        return sorted(r[0] for r in con.execute(_HELD_NOW, self._params(ids=ids)))

    def holders(self, con: psycopg.Connection[Any], item_ids: Sequence[str]) -> dict[str, Holder]:
        """Who holds these items' leases (diagnostics, tests): item id -> holder."""
        ids = list(dict.fromkeys(item_ids))
        if not ids:
            return {}
        return {r[0]: Holder(r[1], float(r[2])) for r in con.execute(_HOLDERS, {"ids": ids})}


__all__ = [
    "ANY_STATUS",
    "CLAIMABLE",
    "HEARTBEAT_EVERY",
    "LEASE_MIGRATION",
    "LEASE_TTL",
    "SWEEP_LIMIT",
    "Clock",
    "Holder",
    "LeaseOwner",
    "Leases",
    "new_owner",
]

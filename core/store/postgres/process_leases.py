"""Leases on what one process does apart from items: an import in flight, a folder it follows.

On SQLite one process holds the data directory, so at its open it may discard an
import another run left half-done and follow every watched folder. On PostgreSQL
several processes on several machines share the catalogue, so each of these is done
by whoever holds its lease (the same owner ids, TTL and clock as the item leases of
``leases.py``, renewed in the same heartbeat):

* **import_lease** (base → ``base_import``): written by a trigger in the very
  transaction that records a base as ``importing`` (owner: the writing session's
  ``ktui.origin``, which every ktui process puts on its connections; TTL: its
  ``ktui.lease_ttl``, :func:`with_lease_ttl`), deleted when the
  import is marked ``done``. Another process discards an ``importing`` base only after
  taking over its expired lease (:func:`take_interrupted_imports`); an importer whose
  lease was taken over cannot mark its import done any more (the trigger refuses), so
  a stalled importer and a discarder never both win.
* **watch_lease** (folder item → its machine and follower): ``host`` is the machine the
  folder belongs to (where it was added or watch was turned on: a path means something
  on one machine only); ``owner`` / ``expires_at`` the one process there that follows
  it now (:func:`take_folders`), NULL when nobody does. A process takes a folder only
  when it runs a watcher, its host is the folder's and the folder exists there; the
  row's absence (a data directory migrated from SQLite) lets the first such process
  record its host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .leases import LEASE_TTL, Leases

TTL_SETTING = "ktui.lease_ttl"  # the session's lease TTL, for the import trigger's first lease


def with_lease_ttl(url: str, ttl: float) -> str:
    """``url`` as a connection string whose sessions carry ``ktui.lease_ttl = ttl`` (libpq
    ``options``, kept with any the URL has): the import trigger's first lease then lives
    as long as the importer's own leases, whatever its ``[store] lease_ttl``."""
    options = str(conninfo_to_dict(url).get("options") or "")
    return make_conninfo(url, options=f"{options} -c {TTL_SETTING}={float(ttl):g}".strip())


PROCESS_LEASE_MIGRATION = f"""
-- imports in flight (core/store/postgres/process_leases.py): who imports a base, until when
CREATE TABLE import_lease (
    base_id     TEXT PRIMARY KEY REFERENCES base_import(base_id) ON DELETE CASCADE,
    owner       TEXT NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX import_lease_owner ON import_lease (owner);
CREATE FUNCTION ktui_import_lease_start() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO @s.import_lease (base_id, owner, expires_at)
    VALUES (NEW.base_id, coalesce(current_setting('ktui.origin', true), ''),
            extract(epoch FROM statement_timestamp())::float8
            + coalesce(nullif(current_setting('{TTL_SETTING}', true), '')::float8, {LEASE_TTL}))
    ON CONFLICT (base_id) DO NOTHING;
    RETURN NULL;
END
$f$;
CREATE TRIGGER import_lease_start AFTER INSERT ON base_import
    FOR EACH ROW WHEN (NEW.state = 'importing') EXECUTE FUNCTION ktui_import_lease_start();
CREATE FUNCTION ktui_import_lease_finish() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
    holder TEXT;
BEGIN
    SELECT owner INTO holder FROM @s.import_lease WHERE base_id = NEW.base_id FOR UPDATE;
    IF FOUND AND holder <> coalesce(current_setting('ktui.origin', true), '') THEN
        RAISE EXCEPTION 'the import of this base was given up: its lease expired and another process discards it'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    DELETE FROM @s.import_lease WHERE base_id = NEW.base_id;
    RETURN NEW;
END
$f$;
CREATE TRIGGER import_lease_finish BEFORE UPDATE OF state ON base_import
    FOR EACH ROW WHEN (OLD.state = 'importing' AND NEW.state = 'done') EXECUTE FUNCTION ktui_import_lease_finish();

-- watched folders: the machine a folder belongs to and the process there that follows it
CREATE TABLE watch_lease (
    item_id     TEXT PRIMARY KEY REFERENCES knowledge_item(id) ON DELETE CASCADE,
    host        TEXT NOT NULL CHECK (length(host) > 0),
    owner       TEXT,
    expires_at  DOUBLE PRECISION,
    CHECK ((owner IS NULL) = (expires_at IS NULL))
);
CREATE INDEX watch_lease_owner ON watch_lease (owner);
"""

_NOW = "COALESCE(%(now)s::float8, extract(epoch FROM statement_timestamp())::float8)"

# Every importing base whose lease expired (or that has none) becomes this owner's; its
# own imports are never taken.
_TAKE_IMPORTS = f"""
INSERT INTO import_lease (base_id, owner, expires_at)
SELECT i.base_id, %(owner)s, {_NOW} + %(ttl)s FROM base_import i WHERE i.state = 'importing'
ON CONFLICT (base_id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
 WHERE import_lease.expires_at < {_NOW} AND import_lease.owner <> EXCLUDED.owner
RETURNING base_id"""
_STILL_IMPORTING = "SELECT base_id FROM base_import WHERE base_id = ANY(%(ids)s) AND state = 'importing'"
_DROP_IMPORTS = "DELETE FROM import_lease WHERE owner = %(owner)s AND base_id = ANY(%(ids)s)"
_RENEW_IMPORTS = f"UPDATE import_lease SET expires_at = {_NOW} + %(ttl)s WHERE owner = %(owner)s"

_RECORD_HOST = """
INSERT INTO watch_lease (item_id, host) SELECT id, %(host)s FROM knowledge_item WHERE id = ANY(%(ids)s)
ON CONFLICT (item_id) DO UPDATE SET host = EXCLUDED.host,
    owner = CASE WHEN watch_lease.host = EXCLUDED.host THEN watch_lease.owner END,
    expires_at = CASE WHEN watch_lease.host = EXCLUDED.host THEN watch_lease.expires_at END"""
_FORGET = "DELETE FROM watch_lease WHERE item_id = ANY(%(ids)s)"
_TAKE_FOLDERS = f"""
INSERT INTO watch_lease (item_id, host, owner, expires_at)
SELECT k.id, %(host)s, %(owner)s, {_NOW} + %(ttl)s FROM knowledge_item k WHERE k.id = ANY(%(ids)s)
ON CONFLICT (item_id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
 WHERE watch_lease.host = EXCLUDED.host
   AND (watch_lease.owner IS NULL OR watch_lease.owner = EXCLUDED.owner OR watch_lease.expires_at < {_NOW})
RETURNING item_id"""
_RENEW_FOLDERS = f"UPDATE watch_lease SET expires_at = {_NOW} + %(ttl)s WHERE owner = %(owner)s RETURNING item_id"
_RELEASE_FOLDERS = "UPDATE watch_lease SET owner = NULL, expires_at = NULL WHERE owner = %(owner)s"
_RELEASE_SOME = _RELEASE_FOLDERS + " AND item_id = ANY(%(ids)s)"
_FOLLOWERS = f"""SELECT item_id, host, owner, owner IS NOT NULL AND expires_at >= {_NOW}
  FROM watch_lease WHERE item_id = ANY(%(ids)s)"""


@dataclass(frozen=True)
class FolderLease:
    """A watched folder's row: the machine it belongs to and who follows it (a live lease)."""

    host: str
    owner: str | None


def host_of(owner: str) -> str:
    """The machine part of an owner id (``<host>:<pid>:<random>``)."""
    return owner.split(":", 1)[0]


def take_interrupted_imports(con: psycopg.Connection[Any], leases: Leases) -> list[str]:
    """Take over the leases of imports nobody alive is running and return the bases that
    are still ``importing`` (the caller discards them). Each statement is its own
    transaction (autocommit): once the lease is ours the importer can no longer finish, so
    what the second statement still sees ``importing`` stays so until we discard it."""
    taken = [r[0] for r in con.execute(_TAKE_IMPORTS, leases._params())]
    if not taken:
        return []
    still = {r[0] for r in con.execute(_STILL_IMPORTING, {"ids": taken})}
    done = [b for b in taken if b not in still]
    if done:  # finished meanwhile: its lease row was ours only for an instant
        con.execute(_DROP_IMPORTS, leases._params(ids=done))
    return [b for b in taken if b in still]


def give_back_imports(con: psycopg.Connection[Any], leases: Leases, base_ids: Sequence[str]) -> None:
    """A discard that failed: the lease row goes, so the next look (of any process) takes
    the import again instead of this owner renewing it forever."""
    if base_ids:
        con.execute(_DROP_IMPORTS, leases._params(ids=list(base_ids)))


def renew(con: psycopg.Connection[Any], leases: Leases) -> list[str]:
    """The heartbeat's part for these leases: push this owner's import and folder leases
    to now + TTL; returns the folders it still holds (a folder missing there was taken
    over or given to another machine: stop following it)."""
    con.execute(_RENEW_IMPORTS, leases._params())
    return [r[0] for r in con.execute(_RENEW_FOLDERS, leases._params())]


def record_host(con: psycopg.Connection[Any], item_ids: Sequence[str], host: str) -> None:
    """These folders belong to `host` from now on (watch turned on there); a follower on
    another machine loses them at its next beat."""
    if item_ids:
        con.execute(_RECORD_HOST, {"ids": list(item_ids), "host": host})


def forget(con: psycopg.Connection[Any], item_ids: Sequence[str]) -> None:
    """Watch turned off: nobody follows these folders any more."""
    if item_ids:
        con.execute(_FORGET, {"ids": list(item_ids)})


def take_folders(con: psycopg.Connection[Any], leases: Leases, item_ids: Sequence[str]) -> list[str]:
    """Follow these folders (the caller checked they exist on this machine) where they
    belong to this owner's host and nobody else alive follows them; returns those taken."""
    ids = list(dict.fromkeys(item_ids))
    if not ids:
        return []
    params = leases._params(ids=ids, host=host_of(leases.owner))
    taken = {r[0] for r in con.execute(_TAKE_FOLDERS, params)}
    return [i for i in ids if i in taken]


def release_folders(con: psycopg.Connection[Any], leases: Leases, item_ids: Sequence[str] | None = None) -> None:
    """Stop following (all of this owner's folders when None): another eligible process
    takes them at its next beat."""
    if item_ids is None:
        con.execute(_RELEASE_FOLDERS, leases._params())
    elif item_ids:
        con.execute(_RELEASE_SOME, leases._params(ids=list(item_ids)))


def followers(con: psycopg.Connection[Any], leases: Leases, item_ids: Sequence[str]) -> dict[str, FolderLease]:
    """Item id -> its machine and live follower (None when nobody follows it now)."""
    ids = list(dict.fromkeys(item_ids))
    if not ids:
        return {}
    rows = con.execute(_FOLLOWERS, leases._params(ids=ids))
    return {r[0]: FolderLease(r[1], r[2] if r[3] else None) for r in rows}


__all__ = [
    "PROCESS_LEASE_MIGRATION",
    "FolderLease",
    "followers",
    "forget",
    "give_back_imports",
    "host_of",
    "record_host",
    "release_folders",
    "renew",
    "take_folders",
    "take_interrupted_imports",
    "with_lease_ttl",
]

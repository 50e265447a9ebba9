"""Catalogue events across processes: NOTIFY inside each write transaction, one LISTEN per process.

**Publishing** is done by the database itself: row triggers on ``knowledge_item`` and
``knowledge_base`` (`NOTIFY_MIGRATION`, a catalogue migration) call ``pg_notify`` in the
transaction that writes the row, so a notification is delivered exactly when (and only
if) the write commits, and no write path can forget one — the state writer, recovery,
imports and a cascade alike. A payload holds kinds and ids only (far below PostgreSQL's
8,000 bytes): ``{"o": origin, "k": kind, "b": base_id, "i": item_id, "g": parent_id}``
with kind ``ia`` / ``ic`` / ``ir`` (item added / changed / removed) or ``bc`` / ``br``
(base changed / removed). Receivers re-read the rows they need. ``o`` is the writing
session's ``ktui.origin`` setting, which every ktui process puts on its connections
(`with_origin`), so a process skips its own notifications (its own bus already had the
events); a write from elsewhere (psql) has no origin and is always taken.

**Listening** (`Listener`): one dedicated connection per process on a thread of its own
issues ``LISTEN`` and hands the notifications, in batches, to a callback (the runtime
feeds them into its EventBus on the event loop). A lost connection (a server restart,
``pg_terminate_backend``, a network cut) is reconnected with a growing delay; once
``LISTEN`` is in place again the `on_resync` callback runs, because notifications sent
meanwhile are gone: UIs reload what they show.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .connection import CONNECT_TIMEOUT, redact, scrub

log = logging.getLogger(__name__)

ORIGIN_SETTING = "ktui.origin"
BATCH_WAIT = 0.002  # seconds the listener gathers more notifications after the first of a batch
STOP_CHECK = 0.2  # seconds between the idle listener's looks at whether it should stop
BATCH_MAX = 2000
RETRY_DELAYS = (0.05, 0.2, 0.5, 1.0, 2.0, 5.0)  # seconds between reconnection attempts (the last repeats)

Payload = dict[str, Any]


def channel_for(schema: str) -> str:
    """The NOTIFY channel of a schema: ``ktui_<schema>``, hashed when that passes 63 bytes
    (PostgreSQL's identifier length; the trigger computes the same name)."""
    name = f"ktui_{schema}"
    if len(name) <= 63:
        return name
    return f"ktui_{schema[:41]}_{hashlib.md5(schema.encode()).hexdigest()[:16]}"


def new_origin() -> str:
    """``<host>:<pid>:<random>``: names one process's connections (letters, digits, ``.:-_``)."""
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:40] or "host"
    return f"{host}:{os.getpid()}:{secrets.token_hex(4)}"


def with_origin(url: str, origin: str) -> str:
    """``url`` as a connection string whose sessions carry ``ktui.origin = origin`` (libpq
    ``options``; any options the URL already has are kept)."""
    if not re.fullmatch(r"[A-Za-z0-9.:_-]+", origin):
        raise ValueError(f"origin {origin!r}: letters, digits and .:_- only")
    options = str(conninfo_to_dict(url).get("options") or "")
    return make_conninfo(url, options=f"{options} -c {ORIGIN_SETTING}={origin}".strip())


# The catalogue migration that makes every item and base write notify (see the module
# docstring). `%%CHANNEL%%` stays SQL: the channel follows the table's own schema.
_CHANNEL_SQL = (
    "CASE WHEN length(TG_TABLE_SCHEMA) <= 58 THEN 'ktui_' || TG_TABLE_SCHEMA "
    "ELSE 'ktui_' || substr(TG_TABLE_SCHEMA, 1, 41) || '_' || substr(md5(TG_TABLE_SCHEMA), 1, 16) END"
)
NOTIFY_MIGRATION = f"""
CREATE OR REPLACE FUNCTION ktui_notify_item() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
    kind text;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; kind := 'ir';
    ELSIF TG_OP = 'INSERT' THEN r := NEW; kind := 'ia';
    ELSE r := NEW; kind := 'ic';
    END IF;
    PERFORM pg_notify({_CHANNEL_SQL}, json_build_object(
        'o', current_setting('{ORIGIN_SETTING}', true), 'k', kind,
        'b', r.base_id, 'i', r.id, 'g', r.group_id)::text);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION ktui_notify_base() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    PERFORM pg_notify({_CHANNEL_SQL}, json_build_object(
        'o', current_setting('{ORIGIN_SETTING}', true),
        'k', CASE WHEN TG_OP = 'DELETE' THEN 'br' ELSE 'bc' END, 'b', r.id)::text);
    RETURN NULL;
END $$;

CREATE TRIGGER knowledge_item_notify AFTER INSERT OR DELETE ON knowledge_item
    FOR EACH ROW EXECUTE FUNCTION ktui_notify_item();
CREATE TRIGGER knowledge_item_notify_update AFTER UPDATE ON knowledge_item
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.phase IS DISTINCT FROM NEW.phase
                       OR OLD.error IS DISTINCT FROM NEW.error OR OLD.data IS DISTINCT FROM NEW.data)
    EXECUTE FUNCTION ktui_notify_item();
CREATE TRIGGER knowledge_base_notify AFTER INSERT OR UPDATE OR DELETE ON knowledge_base
    FOR EACH ROW EXECUTE FUNCTION ktui_notify_base();
"""


class ProgressRelay:
    """Sends running items' progress (never written to the catalogue) to the other processes.

    `send(payload)` may be called from any thread, as often as progress changes: the
    latest payload per item waits, and a thread of its own sends what waits at most every
    `interval` seconds, all items in one statement, on a connection of its own (kind
    ``ip``: base, item, phase ``ph``, fraction ``p``, OCR pages ``op``). Progress is
    best effort: a failed send is dropped and the connection made again on the next.
    """

    def __init__(self, url: str, schema: str, *, origin: str, interval: float = 0.25) -> None:
        self.url = url
        self.channel = channel_for(schema)
        self.origin = origin
        self.interval = interval
        self._pending: dict[str, Payload] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._con: psycopg.Connection[Any] | None = None
        self._thread = threading.Thread(target=self._run, name=f"ktui-progress-{self.channel}", daemon=True)
        self.sent = 0

    def start(self) -> None:
        self._thread.start()

    def send(self, payload: Payload) -> None:
        with self._lock:
            self._pending[str(payload.get("i"))] = {"o": self.origin, **payload}
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=CONNECT_TIMEOUT + 5)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.wait()
                self._wake.clear()
                with self._lock:
                    batch, self._pending = list(self._pending.values()), {}
                if batch and not self._stop.is_set():
                    self._send(batch)
                self._stop.wait(self.interval)
        finally:
            if self._con is not None:
                self._con.close()

    def _send(self, batch: list[Payload]) -> None:
        try:
            if self._con is None or self._con.closed or self._con.broken:
                self._con = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
            self._con.execute("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p",
                              (self.channel, [json.dumps(p, separators=(",", ":")) for p in batch]))
            self.sent += len(batch)
        except psycopg.Error as exc:
            log.debug("progress relay to %s failed: %s", redact(self.url), scrub(str(exc), self.url))
            if self._con is not None:
                self._con.close()
                self._con = None


def parse_payload(text: str) -> Payload | None:
    try:
        payload = json.loads(text)
    except ValueError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("k"), str) or not isinstance(payload.get("b"), str):
        return None
    return payload


class Listener:
    """LISTEN on one schema's channel from a thread of its own (see the module docstring).

    `deliver(batch)` and `on_resync()` are called on the listener's thread: pass callbacks
    that hand over to the event loop (``loop.call_soon_threadsafe``). Notifications whose
    origin is `origin` are dropped here.
    """

    def __init__(
        self,
        url: str,
        schema: str,
        *,
        origin: str | None,
        deliver: Callable[[list[Payload]], None],
        on_resync: Callable[[], None],
        retry_delays: Sequence[float] = RETRY_DELAYS,
    ) -> None:
        self.url = url
        self.where = redact(url)
        self.channel = channel_for(schema)
        self.origin = origin
        self._deliver = deliver
        self._on_resync = on_resync
        self._delays = tuple(retry_delays) or (1.0,)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._con: psycopg.Connection[Any] | None = None
        self.connects = 0  # successful LISTENs so far (the first one and every reconnection)
        self.last_error: str | None = None

    def start(self, timeout: float | None = CONNECT_TIMEOUT) -> None:
        """Start the thread and wait (up to `timeout`) until LISTEN is in place, so that every
        write committed after this returns is seen. A server that cannot be reached yet is
        retried in the background."""
        self._thread = threading.Thread(target=self._run, name=f"ktui-listen-{self.channel}", daemon=True)
        self._thread.start()
        self._ready.wait(timeout)

    @property
    def listening(self) -> bool:
        return self._ready.is_set() and self._con is not None and not self._con.closed

    def backend_pid(self) -> int | None:
        """The server process of the listening connection (tests terminate it)."""
        con = self._con
        return None if con is None or con.closed else con.info.backend_pid

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=CONNECT_TIMEOUT + 5)

    def _connect(self) -> psycopg.Connection[Any]:
        kwargs: dict[str, Any] = {}
        if "connect_timeout" not in conninfo_to_dict(self.url):
            kwargs["connect_timeout"] = CONNECT_TIMEOUT
        con = psycopg.connect(self.url, autocommit=True, **kwargs)
        try:
            con.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except BaseException:
            con.close()
            raise
        return con

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                con = self._connect()
            except psycopg.Error as exc:
                self._failed(exc, failures)
                failures += 1
                continue
            self._con = con
            self.connects += 1
            failures = 0
            again = self._ready.is_set()
            self._ready.set()
            try:
                if again:  # notifications sent while we were away are lost: whoever shows state reloads it
                    self._on_resync()
                self._listen(con)
            except psycopg.Error as exc:
                self._failed(exc, 0)
            finally:
                self._con = None
                con.close()

    def _listen(self, con: psycopg.Connection[Any]) -> None:
        while not self._stop.is_set():
            batch: list[Payload] = []
            # wait for the first notification (waking up now and then to see whether to stop),
            # then take what else has arrived within BATCH_WAIT, and hand it all on at once
            for note in con.notifies(timeout=STOP_CHECK, stop_after=1):
                self._take(note.payload, batch)
            if batch:
                for note in con.notifies(timeout=BATCH_WAIT, stop_after=BATCH_MAX):
                    self._take(note.payload, batch)
            if batch:
                self._deliver(batch)

    def _take(self, text: str, batch: list[Payload]) -> None:
        payload = parse_payload(text)
        if payload is not None and (self.origin is None or payload.get("o") != self.origin):
            batch.append(payload)

    def _failed(self, exc: psycopg.Error, attempt: int) -> None:
        self.last_error = scrub(str(exc).strip() or type(exc).__name__, self.url)
        if attempt == 0:
            log.warning("event listener on %s lost its connection: %s; reconnecting", self.where, self.last_error)
        self._stop.wait(self._delays[min(attempt, len(self._delays) - 1)])

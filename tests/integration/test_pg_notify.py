"""Catalogue events across processes on a real PostgreSQL: the Listener of core/store/postgres/notify.py.

Notifications come from other connections (another process's, in effect) through
``pg_notify``; the listener's own origin is skipped; a listener whose server process is
terminated (``pg_terminate_backend``) reconnects, says so (resync) and hears what is sent
after that.
"""

from __future__ import annotations

import json
import queue

import psycopg
import pytest

from ktui.core.store.postgres.notify import Listener, channel_for, new_origin, with_origin

pytestmark = pytest.mark.timeout(120)


def notify(url: str, schema: str, **payload: object) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("SELECT pg_notify(%s, %s)", (channel_for(schema), json.dumps(payload)))


@pytest.fixture
def heard():
    return queue.Queue()


def start(url: str, schema: str, heard: queue.Queue, origin: str | None) -> Listener:
    listener = Listener(url, schema, origin=origin, deliver=lambda batch: [heard.put(p) for p in batch],
                        on_resync=lambda: heard.put("resync"), retry_delays=(0.01,))
    listener.start()
    assert listener.listening
    return listener


def test_other_origins_are_heard_and_its_own_is_not(postgres_server, pg_schema, heard):
    me = new_origin()
    listener = start(postgres_server.url, pg_schema, heard, me)
    try:
        notify(postgres_server.url, pg_schema, o=me, k="ic", b="b1", i="mine")
        notify(postgres_server.url, pg_schema, o="elsewhere:1:ab", k="ic", b="b1", i="theirs")
        notify(postgres_server.url, pg_schema, k="bc", b="b2")  # no origin: psql, another tool
        notify(postgres_server.url, "other_schema", o="x:1:a", k="bc", b="b3")  # another channel
        got = [heard.get(timeout=30), heard.get(timeout=30)]
        assert [p.get("i", p["b"]) for p in got] == ["theirs", "b2"]
        assert heard.empty()
    finally:
        listener.close()
    assert not listener.listening


def test_a_terminated_listener_reconnects_and_asks_for_a_resync(postgres_server, pg_schema, heard):
    listener = start(postgres_server.url, pg_schema, heard, new_origin())
    try:
        pid = listener.backend_pid()
        with psycopg.connect(postgres_server.url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        assert heard.get(timeout=30) == "resync"
        assert listener.connects == 2 and listener.backend_pid() != pid
        notify(postgres_server.url, pg_schema, o="elsewhere:1:ab", k="ia", b="b1", i="after")
        assert heard.get(timeout=30)["i"] == "after"
    finally:
        listener.close()


def test_with_origin_sets_the_sessions_origin_and_keeps_the_urls_options(postgres_server):
    url = with_origin(postgres_server.url + "&options=-c%20application_name%3Dmine", "host-1:42:beef")
    with psycopg.connect(url, autocommit=True) as con:
        assert con.execute("SELECT current_setting('ktui.origin'), current_setting('application_name')").fetchone() \
            == ("host-1:42:beef", "mine")


def test_a_long_schema_gets_a_channel_postgresql_accepts():
    name = channel_for("s" * 63)
    assert len(name) == 63 and name.startswith("ktui_sss") and channel_for("s" * 63) == name
    assert channel_for("ktui") == "ktui_ktui"


def test_with_origin_passes_tls_options_through_to_the_driver_unchanged():
    from psycopg.conninfo import conninfo_to_dict

    url = "postgresql://bob:pw@db.example:5433/kb?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslcert=/k/c.pem&sslkey=/k/k.pem"
    params = conninfo_to_dict(with_origin(url, "h:1:ab"))
    assert {k: params[k] for k in ("sslmode", "sslrootcert", "sslcert", "sslkey", "host", "port", "dbname", "user")} == {
        "sslmode": "verify-full", "sslrootcert": "/etc/ca.pem", "sslcert": "/k/c.pem", "sslkey": "/k/k.pem",
        "host": "db.example", "port": "5433", "dbname": "kb", "user": "bob"}
    assert params["options"] == "-c ktui.origin=h:1:ab"

"""Several indexer processes on one queue in PostgreSQL, one SIGKILLed mid-item and one
stalled past its leases: every item is completed exactly once, none is lost, and the
dead worker's items come back only once their leases expire.

Real processes (tests/support/pg_lease_worker.py), a real PostgreSQL, real HTTP to a
slow embedding server on 127.0.0.1. Expiry is driven by the test's clock table, which
every worker reads as its now: nothing waits on wall time, and the waits below are
for events (a line from a worker, a count in the database), bounded only as a guard.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

from tests.support.embedding_server import start_embedding_server  # noqa: E402
from tests.support.pg_lease_worker import TTL  # noqa: E402
from tests.support.pg_leases import TableClock, catalogue, completions, connect, prepare  # noqa: E402
from tests.support.processes import alive  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GUARD = 120.0  # seconds: only so a broken build fails instead of hanging


def worker(url: str, schema: str, name: str, mode: str, limit: int, embed_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.pg_lease_worker", url, schema, name, mode, str(limit), embed_url],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )


def claimed(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line == ["ready"]:
        line = proc.stdout.readline().split()
    assert line and line[0] == "working", line
    return line[1:]


def wait_for(check, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_indexer_processes_one_killed_one_stalled_complete_every_item_exactly_once(postgres_server, pg_schema) -> None:
    url = postgres_server.url
    catalogue(url, pg_schema)
    con = connect(url, pg_schema)
    server = start_embedding_server(16)
    procs: list[subprocess.Popen[str]] = []
    try:
        ids = prepare(con, 60)
        server.faults.delay(0.05)  # every embedding request takes 50 ms
        clock = TableClock(con)

        def count(query: str) -> int:
            return int(con.execute(query).fetchone()[0])

        doomed = worker(url, pg_schema, "doomed", "hang", 3, server.url)
        stalled = worker(url, pg_schema, "stalled", "stall", 2, server.url)
        procs += [doomed, stalled]
        doomed_items, stalled_items = claimed(doomed), claimed(stalled)
        assert len(doomed_items) == 3 and len(stalled_items) == 2
        doomed.send_signal(signal.SIGKILL)  # mid-item, holding three leases
        doomed.wait()
        assert not alive(doomed.pid)

        healthy = [worker(url, pg_schema, f"healthy-{k}", "work", 2, server.url) for k in range(2)]
        procs += healthy
        # they do everything else; the dead and the stalled worker's items stay leased
        wait_for(lambda: count("SELECT count(*) FROM done") == 55, "the unleased items")
        left = dict(con.execute("SELECT k.id, l.owner FROM knowledge_item k JOIN item_lease l ON l.item_id = k.id "
                                "WHERE k.status = 'processing'").fetchall())
        assert left == {**dict.fromkeys(doomed_items, "doomed"), **dict.fromkeys(stalled_items, "stalled")}
        assert all(p.poll() is None for p in healthy)  # idle, waiting for the leased items

        clock.advance(TTL + 1)  # the leases of the dead and the stalled worker expire
        for proc in healthy:
            assert proc.wait(GUARD) == 0
        assert stalled.stdin is not None and stalled.stdout is not None
        stalled.stdin.write("go\n")
        stalled.stdin.flush()
        assert stalled.stdout.readline().split() == ["lost", *sorted(stalled_items)]
        assert stalled.wait(GUARD) == 0

        assert completions(con) == dict.fromkeys(ids, 1)  # every item once: none twice, none lost
        done = con.execute("SELECT item_id, worker FROM done").fetchall()
        assert sorted(i for i, _ in done) == ids
        assert {w for _, w in done} == {"healthy-0", "healthy-1"}  # the killed and the stalled wrote nothing
        assert sorted(i for i, in con.execute("SELECT item_id FROM lost").fetchall()) == sorted(stalled_items)
        reclaimed = {i for i, w in con.execute("SELECT item_id, worker FROM work_log").fetchall() if w.startswith("healthy")}
        assert set(doomed_items) | set(stalled_items) <= reclaimed
        assert count("SELECT count(*) FROM item_lease") == 0
        assert server.request_count >= 30  # real embedding requests, two items each
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        server.stop()
        con.close()

"""Three real `ktui serve` processes index one base on a shared PostgreSQL store; one is
SIGKILLed mid-item. Every note ends `completed` exactly once, with exactly one chunk,
and the killed process's items are picked up by the others once its leases expire.

Real processes through the facade and runtime (not the library-level lease worker of
test_pg_lease_processes.py), a real PostgreSQL (pgserver), a slow embedding server on
127.0.0.1. The lease TTL is the `[store] lease_ttl` setting at its minimum (3 s), so the
test waits seconds for the expiry, not 30. Every wait is for a condition (rows in the
database), bounded only as a guard; no duration is asserted.
"""

from __future__ import annotations

import signal
import time

import pytest

pytest.importorskip("psycopg")

from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.pg_serve_indexers import (  # noqa: E402
    add_notes,
    chunks_per_item,
    completion_log,
    completions,
    connect,
    create_base,
    leased_by,
    machine,
    start,
    status_counts,
)
from tests.support.processes import alive  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DIMS = 64
NOTES = 40
GUARD = 120.0  # seconds: only so a broken build fails instead of hanging
server = embedding_server_fixture(DIMS)


def wait_for(check, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_serve_processes_share_a_base_and_a_killed_ones_items_are_indexed_once_by_the_others(
    tmp_path, postgres_server, pg_schema, server
) -> None:
    url = postgres_server.url
    procs = []
    con = None
    try:
        adder = start(machine(tmp_path / "adder", server.url, url, pg_schema, lease_ttl=3, concurrency=2))
        procs.append(adder)
        con = connect(url, pg_schema)  # the catalogue exists once a process has opened it
        completion_log(con)
        victim, other = (start(machine(tmp_path / name, server.url, url, pg_schema, lease_ttl=3, concurrency=2))
                         for name in ("victim", "other"))
        procs += [victim, other]
        base = create_base(adder, "Shared")
        server.faults.delay(0.3)  # every embedding request takes 300 ms: items are in flight a while
        ids = add_notes(adder, base["id"], [f"note {k} about sea otters and leases" for k in range(NOTES)])

        held: list[str] = []

        def victim_holds() -> bool:
            held[:] = leased_by(con, victim.proc.pid)
            return bool(held)

        wait_for(victim_holds, "the victim to claim items from the adder's queue")
        victim.proc.send_signal(signal.SIGKILL)  # mid-item: it holds leases of unfinished notes
        victim.proc.wait()
        assert not alive(victim.proc.pid)
        done_before = set(completions(con))
        unfinished = sorted(set(held) - done_before)  # what it was working on when it died
        assert unfinished, "the victim finished everything it held before the kill"

        wait_for(lambda: status_counts(con, base["id"]) == {"completed": NOTES}, "every note to complete")
        assert completions(con) == dict.fromkeys(ids, 1)  # each completed exactly once: none twice, none lost
        assert chunks_per_item(url, pg_schema, base["id"], base["dimensions"]) == dict.fromkeys(ids, 1)
        assert set(unfinished) <= set(completions(con))  # the killed one's items, done by the others
        assert leased_by(con, victim.proc.pid) == []  # its leases were taken over, then given back on completion
        assert con.execute("SELECT count(*) FROM item_lease").fetchone()[0] == 0
        assert adder.proc.poll() is None and other.proc.poll() is None
    finally:
        for serve in procs:
            if serve.proc.poll() is None:
                serve.stop()
        if con is not None:
            con.close()

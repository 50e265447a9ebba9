"""Indexing throughput with 1, 2 and 4 indexer processes sharing one queue in PostgreSQL
through item leases (issue 20; core/store/postgres/leases.py).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_postgres_indexers.py -m benchmark -s
(KTUI_BENCH_PG_ITEMS items per run, default 160).

Each indexer is a real process (tests/support/pg_lease_worker.py, mode `store`): it
sweeps one item at a time under a lease, embeds its text with one request to a real
embedding server on 127.0.0.1 that answers in 50 ms, writes the chunk into the base's
PgBaseStore, and completes the item under its lease (one transaction with the lease's
DELETE), renewing its leases every round. The items are released (`idle` ->
`processing`) only once every indexer is connected, so start-up is not measured; the
clock stops when the last completion commits. Figures are printed next to the target
(2 processes >= 1.8x one), never asserted; that every item completed exactly once is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktui.core.store.postgres import PgStoreManager
from tests.support.embedding_server import start_embedding_server
from tests.support.pg_lease_worker import DIMS
from tests.support.pg_leases import catalogue, completions, connect, prepare

pytestmark = pytest.mark.benchmark

ROOT = Path(__file__).resolve().parents[2]
ITEMS = int(os.environ.get("KTUI_BENCH_PG_ITEMS", "160"))
LATENCY = 0.05  # seconds per embedding request
TARGET_2 = 1.8


def run(url: str, schema: str, embed_url: str, processes: int) -> float:
    """Items per second with `processes` indexers over ITEMS fresh items."""
    con = connect(url, schema)
    try:
        con.execute("TRUNCATE knowledge_item, done CASCADE")
        prepare(con, ITEMS, prefix=f"p{processes}")
        con.execute("UPDATE knowledge_item SET status = 'idle'")
        procs = [
            subprocess.Popen([sys.executable, "-m", "tests.support.pg_lease_worker", url, schema, f"indexer-{k}",
                              "store", "1", embed_url], cwd=ROOT, stdout=subprocess.PIPE, text=True)
            for k in range(processes)
        ]
        try:
            for proc in procs:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            start = time.perf_counter()
            con.execute("UPDATE knowledge_item SET status = 'processing'")
            while con.execute("SELECT count(*) FROM done").fetchone()[0] < ITEMS:
                time.sleep(0.005)
            elapsed = time.perf_counter() - start
            for proc in procs:
                assert proc.wait(60) == 0
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        counts = completions(con)
        assert sorted(set(counts.values())) == [1] and len(counts) == ITEMS, counts  # every item once
        (done,) = con.execute("SELECT count(DISTINCT item_id) FROM done").fetchone()
        assert done == ITEMS
        return ITEMS / elapsed
    finally:
        con.close()


def test_indexer_processes_scale_on_one_leased_queue(postgres_server, pg_schema) -> None:
    url = postgres_server.url
    stores = PgStoreManager(url, schema=pg_schema)
    server = start_embedding_server(DIMS, subprocess=True)
    try:
        stores.create("bench", DIMS)
        catalogue(url, pg_schema)
        with connect(url, pg_schema) as con:
            prepare(con)
        server.faults.delay(LATENCY)
        rates = {n: run(url, pg_schema, server.url, n) for n in (1, 2, 4)}
        print()
        print(f"indexer processes on one leased queue: {ITEMS} items, one {LATENCY * 1000:.0f} ms embedding "
              "request each, chunk write + completion under the lease")
        ideal = 1 / LATENCY
        for n, rate in rates.items():
            speedup = rate / rates[1]
            target = {1: f"(ideal {ideal:.1f}/s)", 2: f"target >= {TARGET_2}x: {'met' if speedup >= TARGET_2 else 'MISSED'}",
                      4: "(ideal 4x)"}[n]
            print(f"  {n} process(es): {rate:6.1f} items/s  {speedup:4.2f}x one  {target}")
        print(f"  per item beyond the request, one process: {(1 / rates[1] - LATENCY) * 1000:.1f} ms "
              "(renew, sweep, chunk write, completion: four round trips and two commits)")
        assert stores.get("bench", DIMS).count() == 3 * ITEMS  # every run's chunks were written
    finally:
        server.stop()
        stores.close_all()

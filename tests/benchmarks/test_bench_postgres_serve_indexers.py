"""Indexing throughput of 1, 2 and 4 real `ktui serve` processes on one base of a shared
PostgreSQL store, through the real runtime (issue 20: target 2 processes >= 1.8x one).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_postgres_serve_indexers.py -m benchmark -s
(KTUI_BENCH_PG_NOTES notes per run, default 300; KTUI_BENCH_PG_ROUNDS rounds, default 1, each
running 1, 2 and 4 processes in turn, so that every ratio is against the one-process run of
its own round on a machine whose load changes; KTUI_BENCH_PG_PROCESSES, default "1,2,4").

Unlike test_bench_postgres_indexers.py (library-level lease workers), each indexer here
is a whole `ktui serve` process with the default settings (concurrency 5, read-ahead,
group commits), its own data directory and embedding cache, on one `[store]` schema: the
facade, the runtime's queue, the fair-share sweeps of its heartbeat (heartbeat.py), the
completion under the lease with the chunks in its transaction. The embedding server is a
real HTTP server in a process of its own on 127.0.0.1, answering every request after
50 ms. Each run starts its processes, waits until all listen (start-up is not
measured), then adds the notes through the first process's HTTP API (it queues them; the
others sweep their share of what it has not started) and stops the clock when the last
note is `completed` in the catalogue. Figures are printed next to the target and the
same-run one-process baseline, never asserted; that every note completed exactly once,
with one chunk, is.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

from tests.support.embedding_server import start_embedding_server
from tests.support.pg_serve_indexers import (
    add_notes,
    chunks_per_item,
    completion_log,
    completions,
    connect,
    create_base,
    history,
    machine,
    start,
    status_counts,
)

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(1800)]

NOTES = int(os.environ.get("KTUI_BENCH_PG_NOTES", "300"))
LATENCY = 0.05  # seconds per embedding request
DIMS = 64
TARGET_2 = 1.8
ROUNDS = int(os.environ.get("KTUI_BENCH_PG_ROUNDS", "1"))
PROCESSES = tuple(int(n) for n in os.environ.get("KTUI_BENCH_PG_PROCESSES", "1,2,4").split(","))


def run(tmp_path, url: str, schema: str, server, processes: int, round_: int) -> tuple[float, int]:
    """Notes per second with `processes` serve processes, and the requests they sent."""
    serves = []
    con = connect(url, schema)
    try:
        for k in range(processes):
            serves.append(start(machine(tmp_path / f"r{round_}-p{processes}-{k}", server.url, url, schema,
                                        lease_ttl=30)))
        completion_log(con)
        base = create_base(serves[0], f"bench-{round_}-{processes}")
        texts = [f"note {k} of run {processes}: sea otters hold hands while they sleep, {k * 7919}"
                 for k in range(NOTES)]
        requests = server.request_count
        start_at = time.perf_counter()
        ids = add_notes(serves[0], base["id"], texts)
        deadline = start_at + 900
        while status_counts(con, base["id"]).get("completed", 0) < NOTES:
            assert time.perf_counter() < deadline, status_counts(con, base["id"])
            time.sleep(0.01)
        elapsed = time.perf_counter() - start_at
        sent = server.request_count - requests
        counts = completions(con)
        twice = [i for i in ids if counts.get(i) != 1]
        assert not twice, history(con, twice)  # every note completed exactly once
        assert chunks_per_item(url, schema, base["id"], base["dimensions"]) == dict.fromkeys(ids, 1)
        assert all(s.proc.poll() is None for s in serves)
        return NOTES / elapsed, sent
    finally:
        for serve in serves:
            serve.stop()
        con.close()


def test_serve_processes_scale_on_one_shared_base(tmp_path, postgres_server, pg_schema) -> None:
    server = start_embedding_server(DIMS, subprocess=True)
    rounds: list[dict[int, tuple[float, int]]] = []
    try:
        server.faults.delay(LATENCY)
        for round_ in range(ROUNDS):
            load = os.getloadavg()[0]
            figures = {n: run(tmp_path, postgres_server.url, pg_schema, server, n, round_) for n in PROCESSES}
            rounds.append(figures)
            one = figures[PROCESSES[0]][0]
            print(f"\n  round {round_ + 1} (load average {load:.2f} at its start): "
                  + "  ".join(f"{n}p {rate:.1f} notes/s {rate / one:.2f}x" for n, (rate, _) in figures.items()),
                  flush=True)
    finally:
        server.stop()
    print()
    print(f"ktui serve processes on one PostgreSQL base: {NOTES} notes added through the first one, "
          f"embedding server answering in {LATENCY * 1000:.0f} ms, default settings (concurrency 5); "
          f"{os.cpu_count()} cores; {ROUNDS} round(s), medians of the same-round ratios")
    for n in PROCESSES:
        ratios = [r[n][0] / r[PROCESSES[0]][0] for r in rounds]
        ratio = statistics.median(ratios)
        rate = statistics.median(r[n][0] for r in rounds)
        sent = sum(r[n][1] for r in rounds)
        note = {1: "(baseline)", 2: f"target >= {TARGET_2}x: {'met' if ratio >= TARGET_2 else 'MISSED'}",
                4: "(ideal 4x)"}.get(n, "")
        print(f"  {n} process(es): {rate:6.1f} notes/s  {ratio:4.2f}x one (rounds: "
              f"{' / '.join(f'{x:.2f}' for x in ratios)})  {NOTES * ROUNDS / max(sent, 1):.1f} notes a request  {note}")

"""PostgreSQL + pgvector store next to the SQLite store, same data, same run (issue 20).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_postgres.py -m benchmark -s -p no:xdist
(KTUI_BENCH_PG_N rows, default 100,000; KTUI_BENCH_PG_D dimensions, default 384;
KTUI_BENCH_PG_BUILD_MEMORY overrides `PgTuning.build_memory` for the final build).

While the base grows, at each checkpoint: the exact scan's p50/p95 on PostgreSQL and
the SQLite store's, for k = 10 and k = 200 (the candidate pool every hybrid search asks
for); at the checkpoints below the full size an HNSW index is built, measured (latency,
recall@10 against the exact scan) and dropped again, so the figures say from which size
HNSW pays (`PgTuning.hnsw_from`). At the full size: the HNSW build, its latency and
recall, keyword and hybrid latency, write throughput, and the benchmark's own resident
memory while inserting (the data is generated batch by batch, so it is the stores' and
the driver's memory that shows). Timing is printed, never asserted; recall is asserted
loosely (>= 0.9) because it is the point of the index.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from psycopg import sql

from ktui.core.models import Chunk
from ktui.core.store import StoreManager
from ktui.core.store.postgres import PgStoreManager, PgTuning
from ktui.core.store.postgres.schema import REGISTRY, hnsw_index_name
from ktui.core.store.postgres.store import ef_search_for

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(0)]  # a 1M run takes far longer than the default limit

N = int(os.environ.get("KTUI_BENCH_PG_N", "100000"))
D = int(os.environ.get("KTUI_BENCH_PG_D", "384"))
BUILD_MEMORY = os.environ.get("KTUI_BENCH_PG_BUILD_MEMORY", PgTuning().build_memory)
K = 10
POOL = 200  # core/store/hybrid.py's CANDIDATE_POOL
BATCH = 1000  # chunks per write (one item each)
CHECKPOINTS = [n for n in (2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 250_000, 1_000_000) if n < N] + [N]
PROBE_HNSW_UP_TO = 100_000  # checkpoints below N where an index is built, measured and dropped


class Data:
    """Embedding-like data: points around 1,000 topic centres, generated batch by batch."""

    def __init__(self, seed: int = 20, clusters: int = 1000):
        self.rng = np.random.default_rng(seed)
        self.centres = self.rng.standard_normal((clusters, D), dtype=np.float32)
        self.queries = self.around(100)
        self.vocab = np.array([f"w{i}x" for i in range(5000)], dtype=object)
        p = 1.0 / np.arange(1, len(self.vocab) + 1)
        self.p = p / p.sum()
        self.first_texts: list[str] = []

    def around(self, n: int) -> np.ndarray:
        picks = self.centres[self.rng.integers(0, len(self.centres), n)]
        return picks + self.rng.standard_normal((n, D), dtype=np.float32)

    def texts(self, n: int) -> list[str]:
        """n chunk texts of 40 words from a Zipf-like vocabulary of 5,000 made-up words."""
        picks = self.rng.choice(len(self.vocab), size=(n, 40), p=self.p)
        out = [" ".join(self.vocab[row]) for row in picks]
        if len(self.first_texts) < 15:
            self.first_texts += out[: 15 - len(self.first_texts)]
        return out


def timed(fn: Callable[[int], object], runs: int) -> tuple[float, float, list[object]]:
    """p50 and p95 in ms over `runs` calls fn(0..runs-1), and the calls' results."""
    times, results = [], []
    for i in range(runs):
        t = time.perf_counter()
        results.append(fn(i))
        times.append((time.perf_counter() - t) * 1000)
    p50, p95 = np.percentile(times, [50, 95])
    return float(p50), float(p95), results


def rss_mib(field: str = "RssAnon") -> float:
    """This process's anonymous resident memory (its heap: what would grow with N if rows were
    kept); VmRSS also counts the pages of the SQLite store's memory-mapped vector file that
    searches touched, which are the page cache's to drop."""
    with open("/proc/self/status") as f:
        for row in f:
            if row.startswith(field + ":"):
                return int(row.split()[1]) / 1024
    return float("nan")


def line(name: str, value: str, target: str = "") -> None:
    print(f"  {name:<60} {value:>26}   {('target ' + target) if target else ''}", flush=True)


def pct(p: tuple[float, float, object]) -> str:
    return f"{p[0]:.1f}/{p[1]:.1f}"


def recall(exact: list[object], approx: list[object]) -> float:
    hits = sum(len({c for c, _ in e[:K]} & {c for c, _ in a[:K]}) for e, a in zip(exact, approx, strict=True))  # type: ignore[index, attr-defined]
    return hits / (len(exact) * K)


def drop_index(pg: PgStoreManager, store) -> None:
    with pg._pool.connection() as con, con.transaction():
        con.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(hnsw_index_name(store.table))))
        con.execute(sql.SQL("UPDATE {} SET hnsw = false WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (store.base_id,))


def test_postgres_next_to_sqlite(tmp_path: Path, postgres_server, pg_schema) -> None:
    data = Data()
    q = data.queries
    # searches stay exact until the index is built here; the final build may get more memory
    pg = PgStoreManager(postgres_server.url, schema=pg_schema, tuning=PgTuning(hnsw_from=N + 1, build_memory=BUILD_MEMORY))
    lite = StoreManager(tmp_path)
    pstore, sstore = pg.create("bench", D), lite.create("bench", D)
    runs = 15 if N <= 250_000 else 9
    print(f"\nPostgreSQL store vs SQLite store, {N:,} x {D}, p50/p95 in ms over {runs} queries (2 shared cores)")
    pg_write = lite_write = 0.0
    done = 0
    rss_start, rss_peak = rss_mib(), 0.0
    pays_from: dict[int, int | None] = {K: None, POOL: None}
    for checkpoint in CHECKPOINTS:
        while done < checkpoint:
            hi = min(done + BATCH, checkpoint)
            entry = [(f"item-{done}", [Chunk(t, {}) for t in data.texts(hi - done)], data.around(hi - done))]
            t = time.perf_counter()
            pstore.replace_items(entry)
            pg_write += time.perf_counter() - t
            t = time.perf_counter()
            sstore.replace_items(entry)
            lite_write += time.perf_counter() - t
            done = hi
            rss_peak = max(rss_peak, rss_mib())
        print(f" {checkpoint:,} rows (benchmark RSS: anonymous {rss_mib():.0f} MiB, +{rss_mib() - rss_start:.0f} since the start;"
              f" with mapped files {rss_mib('VmRSS'):.0f} MiB)")
        exact = {}
        for k in (K, POOL):
            exact[k] = timed(lambda i, k=k: pstore.search_vector(q[i], k, exact=True), runs)
            lite_k = timed(lambda i, k=k: sstore.search_vector(q[i], k), runs)
            line(f"  k={k}: PostgreSQL exact / SQLite", f"{pct(exact[k])} / {pct(lite_k)}")
        if checkpoint < N and checkpoint > PROBE_HNSW_UP_TO:
            continue
        t = time.perf_counter()
        assert pstore.build_index()
        build_s = time.perf_counter() - t
        for k in (K, POOL):
            hnsw = timed(lambda i, k=k: pstore.search_vector(q[i], k), runs)
            line(f"  k={k}: PostgreSQL HNSW, recall@10 vs exact", f"{pct(hnsw)}, {recall(exact[k][2], hnsw[2]):.3f}")
            if pays_from[k] is None and hnsw[0] < exact[k][0]:
                pays_from[k] = checkpoint
        line("  HNSW build (m=16, ef_construction=64)", f"{build_s:.1f} s")
        if checkpoint < N:
            drop_index(pg, pstore)
    line("HNSW p50 beats the exact scan's from (k=10 / k=200)", f"{pays_from[K]} / {pays_from[POOL]} rows",
         f"PgTuning.hnsw_from = {PgTuning().hnsw_from:,}")
    line("write throughput PostgreSQL / SQLite (chunks/s)", f"{N / pg_write:,.0f} / {N / lite_write:,.0f}")
    line("benchmark anonymous RSS while inserting: peak / growth", f"{rss_peak:.0f} / +{rss_peak - rss_start:.0f} MiB",
         "bounded (not ~ N)")

    # at the full size, with the index: recall on 50 queries, keyword and hybrid search
    exact50 = [pstore.search_vector(v, K, exact=True) for v in q[:50]]
    r100 = recall(exact50, [pstore.search_vector(v, K) for v in q[:50]])
    r200 = recall(exact50, [pstore.search_vector(v, POOL)[:K] for v in q[:50]])
    ef10, ef200 = ef_search_for(N, K, pg.tuning), ef_search_for(N, POOL, pg.tuning)
    line(f"recall@10 HNSW vs exact, 50 queries, top-{K} / top-{POOL} (ef_search {ef10} / {ef200}: ef_search_for)",
         f"{r100:.3f} / {r200:.3f}", ">= 0.95")
    lite10 = timed(lambda i: sstore.search_vector(q[i], K), runs)
    hnsw10 = timed(lambda i: pstore.search_vector(q[i], K), runs)
    line("k=10 at full size: PostgreSQL HNSW / SQLite", f"{pct(hnsw10)} / {pct(lite10)}", "HNSW <= 10 ms")
    query_words = [" ".join(t.split()[j] for j in (0, 7, 19)) for t in data.first_texts]
    pg_bm25 = timed(lambda i: pstore.search_bm25(query_words[i], POOL), len(query_words))
    lite_bm25 = timed(lambda i: sstore.search_bm25(query_words[i], POOL), len(query_words))
    pg_hybrid = timed(lambda i: pstore.search_hybrid(q[i], query_words[i], K, 0.5), len(query_words))
    lite_hybrid = timed(lambda i: sstore.search_hybrid(q[i], query_words[i], K, 0.5), len(query_words))
    line("keyword (bm25, pool 200) PostgreSQL / SQLite", f"{pct(pg_bm25)} / {pct(lite_bm25)}")
    line("hybrid (both pools, fused) PostgreSQL / SQLite", f"{pct(pg_hybrid)} / {pct(lite_hybrid)}")
    assert r100 >= 0.9
    pg.close_all()
    lite.close_all()

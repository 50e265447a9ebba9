"""PostgreSQL + pgvector store next to the SQLite store, same data, same run (issue 20).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_postgres.py -m benchmark -s
(KTUI_BENCH_PG_N rows, default 100,000; KTUI_BENCH_PG_D dimensions, default 384).

Measured while the base grows (so the exact scan's cost at each size shows where an
HNSW index starts to pay: `PgTuning.hnsw_from`), then with the HNSW index: latency of
k = 10 and of k = 200 (the candidate pool every search asks for), recall@10 against
the exact scan, keyword and hybrid latency, write throughput, index build time. Timing
is printed, never asserted; recall is asserted loosely (>= 0.9) because it is the
point of the index.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np
import pytest

from ktui.core.models import Chunk
from ktui.core.store import StoreManager
from ktui.core.store.postgres import PgStoreManager, PgTuning

pytestmark = pytest.mark.benchmark

N = int(os.environ.get("KTUI_BENCH_PG_N", "100000"))
D = int(os.environ.get("KTUI_BENCH_PG_D", "384"))
K = 10
BATCH = 1000  # chunks per write (one item each)
CHECKPOINTS = [n for n in (5_000, 10_000, 20_000, 50_000, 100_000, 250_000, 1_000_000) if n <= N]


def clustered(rng: np.random.Generator, n: int, clusters: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """Embedding-like data: points around topic centres (as in test_bench_store.py)."""
    centres = rng.standard_normal((clusters, D), dtype=np.float32)
    data = centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, D), dtype=np.float32)
    queries = centres[rng.integers(0, clusters, 100)] + rng.standard_normal((100, D), dtype=np.float32)
    return data, queries


def words(rng: np.random.Generator, n: int) -> list[str]:
    """n chunk texts of 40 words from a Zipf-like vocabulary of 5,000 made-up words."""
    vocab = np.array([f"w{i}x" for i in range(5000)], dtype=object)
    p = 1.0 / np.arange(1, len(vocab) + 1)
    picks = rng.choice(len(vocab), size=(n, 40), p=p / p.sum())
    return [" ".join(vocab[row]) for row in picks]


def median_ms(fn, runs: int = 15) -> float:
    times = []
    for i in range(runs):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def line(name: str, value: str, target: str = "") -> None:
    print(f"  {name:<56} {value:>14}   {('target ' + target) if target else ''}")


def test_postgres_next_to_sqlite(tmp_path: Path, postgres_server, pg_schema) -> None:
    rng = np.random.default_rng(20)
    data, queries = clustered(rng, N)
    texts = words(rng, N)
    pg = PgStoreManager(postgres_server.url, schema=pg_schema, tuning=PgTuning(hnsw_from=N + 1))  # index built below
    lite = StoreManager(tmp_path)
    pstore, sstore = pg.create("bench", D), lite.create("bench", D)
    print(f"\nPostgreSQL store vs SQLite store, {N:,} x {D}, k={K} (2 shared cores)")
    pg_write = lite_write = 0.0
    done = 0
    for checkpoint in CHECKPOINTS:
        while done < checkpoint:
            hi = min(done + BATCH, checkpoint)
            entry = [(f"item-{done}", [Chunk(t, {}) for t in texts[done:hi]], data[done:hi])]
            t = time.perf_counter()
            pstore.replace_items(entry)
            pg_write += time.perf_counter() - t
            t = time.perf_counter()
            sstore.replace_items(entry)
            lite_write += time.perf_counter() - t
            done = hi
        pg_ms = median_ms(lambda i: pstore.search_vector(queries[i], K, exact=True))
        lite_ms = median_ms(lambda i: sstore.search_vector(queries[i], K))
        line(f"vector search at {checkpoint:>9,} rows: PostgreSQL exact / SQLite", f"{pg_ms:6.1f} / {lite_ms:5.1f} ms")
    line("write throughput PostgreSQL / SQLite (chunks/s)", f"{N / pg_write:,.0f} / {N / lite_write:,.0f}")

    t = time.perf_counter()
    assert pstore.build_index()
    build_s = time.perf_counter() - t
    line("HNSW build (m=16, ef_construction=64)", f"{build_s:.1f} s")

    exact10 = median_ms(lambda i: pstore.search_vector(queries[i], K, exact=True))
    hnsw10 = median_ms(lambda i: pstore.search_vector(queries[i], K))
    hnsw200 = median_ms(lambda i: pstore.search_vector(queries[i], 200))
    exact200 = median_ms(lambda i: pstore.search_vector(queries[i], 200, exact=True))
    lite200 = median_ms(lambda i: sstore.search_vector(queries[i], 200))
    line("PostgreSQL k=10: exact / HNSW", f"{exact10:.1f} / {hnsw10:.1f} ms", "HNSW <= 10 ms")
    line("k=200 (the search's pool): exact / HNSW / SQLite", f"{exact200:.1f} / {hnsw200:.1f} / {lite200:.1f} ms")
    hits = hits200 = 0
    for q in queries[:50]:
        exact = {c for c, _ in pstore.search_vector(q, K, exact=True)}
        hits += len(exact & {c for c, _ in pstore.search_vector(q, K)})
        hits200 += len(exact & {c for c, _ in pstore.search_vector(q, 200)[:K]})
    recall, recall200 = hits / (50 * K), hits200 / (50 * K)
    line("recall@10 HNSW vs exact (ef_search 100 / 200)", f"{recall:.3f} / {recall200:.3f}", ">= 0.95")

    query_words = [" ".join(texts[i].split()[j] for j in (0, 7, 19)) for i in range(15)]
    pg_bm25 = median_ms(lambda i: pstore.search_bm25(query_words[i], 200))
    lite_bm25 = median_ms(lambda i: sstore.search_bm25(query_words[i], 200))
    pg_hybrid = median_ms(lambda i: pstore.search_hybrid(queries[i], query_words[i], K, 0.5))
    lite_hybrid = median_ms(lambda i: sstore.search_hybrid(queries[i], query_words[i], K, 0.5))
    line("keyword (bm25, pool 200) PostgreSQL / SQLite", f"{pg_bm25:.1f} / {lite_bm25:.1f} ms")
    line("hybrid (both pools, fused) PostgreSQL / SQLite", f"{pg_hybrid:.1f} / {lite_hybrid:.1f} ms")
    assert recall >= 0.9
    pg.close_all()
    lite.close_all()

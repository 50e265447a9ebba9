"""Listing every item of a large base (`ktui items BASE --all`), against a native scan.

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_list_items.py -m benchmark -s -p no:xdist
     (sizes: KTUI_BENCH_LIST_SIZES, default "5000,20000,50000"; backends:
     KTUI_BENCH_LIST_BACKENDS, default "sqlite,postgres")

One base grows by folders of small Markdown files (indexed in-process through the
zero-latency embedding server) to each size in turn; at each size, in the same run:

* peer: one native `SELECT <item columns> FROM knowledge_item WHERE base_id = ?`, all
  rows fetched (sqlite3 / psycopg, a fresh connection), median of 3;
* keyset: the facade's `iter_items(base, group_id=ANY_GROUP)` (pages of 1000 by cursor,
  what the CLI does now), in-process, median of 3, and its ratio to the peer;
* by page number: the facade's `list_items(..., page=p, limit=100)` loop the CLI used
  before (a count and an OFFSET per page), once, and its ratio to the peer;
* the whole `ktui items BASE --all --json > /dev/null` process: wall seconds and peak RSS.

The keyset ratio should stay flat as the base grows (O(n)), where pages by number grow
with it (O(n²)). Nothing about timing is asserted.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktui.core.models import ANY_GROUP, ItemInput
from tests.benchmarks.test_bench_scale import ktui_env, make_corpus
from tests.support.embedding_server import start_embedding_server
from tests.support.facades import backend_overrides
from tests.support.services import FAKE_MODEL, open_service

pytestmark = pytest.mark.benchmark

SIZES = [int(s) for s in os.environ.get("KTUI_BENCH_LIST_SIZES", "5000,20000,50000").split(",")]
BACKENDS = os.environ.get("KTUI_BENCH_LIST_BACKENDS", "sqlite,postgres").split(",")
DIMS = 16
COLUMNS = "id, base_id, group_id, type, data, status, phase, error, created_at, updated_at"


def median(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def amedian(make, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await make()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def native_scan(kind: str, data: Path, store: object, base_id: str) -> int:
    if kind == "sqlite":
        import sqlite3

        con = sqlite3.connect(data / "knowledge.db")
        try:
            return len(con.execute(f"SELECT {COLUMNS} FROM knowledge_item WHERE base_id = ?", (base_id,)).fetchall())
        finally:
            con.close()
    import psycopg

    with psycopg.connect(store.url) as con:  # type: ignore[attr-defined]
        con.execute(f'SET search_path TO "{store.schema}"')  # type: ignore[attr-defined]
        return len(con.execute(f"SELECT {COLUMNS} FROM knowledge_item WHERE base_id = %s", (base_id,)).fetchall())


async def keyset(ks, base_id: str) -> int:
    return sum([1 async for _ in ks.iter_items(base_id, group_id=ANY_GROUP, page_size=1000)])


async def by_page_number(ks, base_id: str) -> int:
    n, page = 0, 1
    while True:
        listing = await ks.list_items(base_id, group_id=ANY_GROUP, page=page, limit=100)
        n += len(listing.items)
        if page >= listing.pages:
            return n
        page += 1


def cli_items(env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `ktui items Bench --all --json > /dev/null`."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "items", "Bench", "--all", "--json"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, proc.stderr.read()[-2000:] if proc.stderr else ""
    scale = 1024 if sys.platform != "darwin" else 1024 * 1024
    return wall, usage.ru_maxrss / scale


def settings_file(path: Path, url: str, store: object | None) -> Path:
    text = f'auto_ollama = false\ndefault_embedding_model = "{FAKE_MODEL}"\n' \
           f'[providers.fake]\nkind = "openai"\nbase_url = "{url}/v1"\n'
    if store is not None:
        text += f'[store]\nurl = "{store.url}"\nschema = "{store.schema}"\n'  # type: ignore[attr-defined]
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.timeout(4 * 3600)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_listing_all_items_of_a_growing_base(kind, request, tmp_path):
    if kind not in BACKENDS:
        pytest.skip(f"{kind} is not in KTUI_BENCH_LIST_BACKENDS")
    overrides = backend_overrides(kind, request)
    store = overrides.get("store")
    server = start_embedding_server(DIMS, subprocess=True)
    data = tmp_path / "home"
    env = ktui_env(data, settings_file(tmp_path / "c.toml", server.url, store))
    runner = asyncio.Runner()
    rows = []
    try:
        done = 0
        for size in SIZES:
            async def grow(size=size, done=done):
                async with open_service(data, server.url, **overrides) as ks:
                    bases = {b.name: b for b in (await ks.list_bases(limit=100)).items}
                    base = bases.get("Bench") or await ks.create_base("Bench", FAKE_MODEL, DIMS)
                    # files beyond those already indexed, in a folder of their own (files per
                    # level of 1000: make_corpus's layout)
                    corpus = make_corpus(tmp_path / f"corpus-{size}", size - done)
                    await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
                    assert await ks.wait_idle(timeout=7200)
                    n = await keyset(ks, base.id)
                    fast = await amedian(lambda: keyset(ks, base.id))
                    slow = await amedian(lambda: by_page_number(ks, base.id), runs=1)
                    return base.id, n, fast, slow

            base_id, n, fast, slow = runner.run(grow())
            done = size
            peer = median(lambda base_id=base_id: native_scan(kind, data, store, base_id))
            assert native_scan(kind, data, store, base_id) == n
            wall, rss = cli_items(env)
            rows.append((size, n, peer, fast, slow, wall, rss))
    finally:
        runner.close()
        server.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)

    print(f"\nlisting every item of one base ({kind}): native SELECT ... WHERE base_id = ? (peer), the facade "
          "by cursor (iter_items, pages of 1000) and by page number (list_items, pages of 100, the old CLI path), "
          "and the whole `ktui items Bench --all --json >/dev/null` process")
    for _size, n, peer, fast, slow, wall, rss in rows:
        print(f"  {n:>7,} items: peer {peer * 1000:7.1f} ms | keyset {fast * 1000:8.1f} ms = {fast / peer:5.2f}x peer"
              f" | by page number {slow * 1000:9.1f} ms = {slow / peer:7.2f}x peer | ktui items --all --json "
              f"{wall:6.2f} s, {rss:5.0f} MB RSS")
    if len(rows) > 1:
        (n0, f0), (n1, f1) = ((r[1], r[3] / r[2]) for r in (rows[0], rows[-1]))
        print(f"  keyset/peer ratio at {n1:,} / at {n0:,} = {f1 / f0:.2f} (flat: O(n))")


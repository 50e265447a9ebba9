"""Folders of many small files through the whole `ktui` process (issue 17).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_scale.py -m benchmark -s -p no:xdist
     (sizes: KTUI_BENCH_SCALE_SIZES, default "200,2000,20000"; add 100000 for the long run)

* `ktui add BASE DIR --wait` as a whole process, small Markdown files (one chunk
  each), through the zero-latency OpenAI-compatible server on 127.0.0.1 (its own
  process): files/s, CPU seconds per file (this process and its parse worker),
  embedding requests. Target: files/s at the largest size >= 0.8x at 2,000.
* The same largest folder through the facade in-process (no CLI): the CLI within 10 %.
* The `llm` CLI (`llm embed-multi --files`, model `3-small` pointed at the server with
  OPENAI_BASE_URL) on the same files and server, installed
  into a venv of its own (KTUI_BENCH_LLM_VENV, default <tmp>/llm-venv; created with pip
  when missing). When it cannot be installed, that is printed and only the in-process
  ratio is given.
* Start-up: whole-process `ktui search`, `ktui base list`, `ktui --help` against
  `python -c 'import numpy'` in the same run. Target: `ktui search` <= 2.5x numpy.

Nothing about timing is asserted; every figure is printed next to its target.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ktui.core.models import ItemInput
from tests.support.embedding_server import start_embedding_server
from tests.support.services import open_service

pytestmark = pytest.mark.benchmark

SIZES = [int(s) for s in os.environ.get("KTUI_BENCH_SCALE_SIZES", "200,2000,20000").split(",")]
DIMS = 384
WORDS = ("knowledge base search vector chunk embedding terminal keyboard folder sitemap note python "
         "sqlite index query ranking hybrid fusion model server local offline fast").split()


def make_corpus(root: Path, n: int) -> Path:
    rng = random.Random(7)
    for i in range(n):
        path = root / f"d{i // 1000:03d}" / f"n{i:06d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}\n\n" + " ".join(rng.choice(WORDS) for _ in range(60)) + ".\n")
    return root


def stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/_control/stats") as r:
        return json.load(r)


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the process and its children, stderr tail."""
    before = os.times()
    started = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=7200)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    assert res.returncode == 0, res.stderr[-2000:]
    return wall, cpu, res.stderr[-300:]


def ktui_env(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_")}
    env.update(KTUI_HOME=str(home), KTUI_CONFIG=str(config))
    return env


def write_config(path: Path, url: str) -> Path:
    path.write_text(f'auto_ollama = false\ndefault_embedding_model = "fake::bench"\n'
                    f'[providers.fake]\nkind = "openai"\nbase_url = "{url}/v1"\n', encoding="utf-8")
    return path


def llm_venv(tmp: Path) -> Path | None:
    venv = Path(os.environ.get("KTUI_BENCH_LLM_VENV", tmp / "llm-venv"))
    llm = venv / "bin" / "llm"
    if not llm.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "llm"], check=True, timeout=900,
                           capture_output=True)
        except (subprocess.SubprocessError, OSError) as exc:
            print(f"llm could not be installed ({exc}); comparing with the in-process runtime only")
            return None
    return llm


def run_llm(llm: Path, corpus: Path, url: str, work: Path) -> tuple[float, float, int]:
    """`llm embed-multi --files` over the corpus against the same server."""
    user = work / "llm-home"
    user.mkdir(parents=True, exist_ok=True)
    # llm (0.36) reads extra-openai-models.yaml for chat and completion models only; its
    # OpenAI embedding models use the openai client, which takes the endpoint from
    # OPENAI_BASE_URL. The test server answers any model name.
    env = dict(os.environ, LLM_USER_PATH=str(user), OPENAI_API_KEY="unused", OPENAI_BASE_URL=f"{url}/v1")
    before = stats(url)["request_count"]
    wall, cpu, _ = timed([str(llm), "embed-multi", "notes", "--files", str(corpus), "**/*.md",
                          "-m", "3-small", "-d", str(work / "llm.db")], env)
    return wall, cpu, stats(url)["request_count"] - before


async def in_process(corpus: Path, data: Path, url: str) -> float:
    async with open_service(data, url) as ks:
        base = await ks.create_base("Bench", dimensions=DIMS)
        started = time.perf_counter()
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
        assert await ks.wait_idle(timeout=7200)
        return time.perf_counter() - started


def median_wall(cmd: list[str], env: dict[str, str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=120)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@pytest.mark.timeout(4 * 3600)
def test_folders_of_many_files_through_the_cli(tmp_path):
    server = start_embedding_server(DIMS, subprocess=True)
    try:
        url = server.url
        rows = []
        for n in SIZES:
            work = tmp_path / f"n{n}"
            corpus = make_corpus(work / "corpus", n)
            config = write_config(work / "c.toml", url)
            env = ktui_env(work / "home", config)
            subprocess.run([sys.executable, "-m", "ktui", "base", "create", "Bench", "--dimensions", str(DIMS)],
                           env=env, check=True, capture_output=True, timeout=300)
            before = stats(url)["request_count"]
            wall, cpu, _ = timed([sys.executable, "-m", "ktui", "add", "Bench", str(corpus), "--wait"], env)
            rows.append((n, wall, cpu, stats(url)["request_count"] - before, work, corpus, env))

        print("\n`ktui add DIR --wait`, small Markdown files, zero-latency server (whole process)")
        rate = {n: n / wall for n, wall, *_ in rows}
        for n, wall, cpu, requests, *_ in rows:
            print(f"  {n:>7,} files: {wall:7.1f} s = {n / wall:6.1f} files/s, CPU {cpu / n * 1000:5.2f} ms/file, "
                  f"{requests:,} requests ({n / max(requests, 1):.1f} files per request)")
        largest = max(SIZES)
        if 2000 in rate:
            print(f"  linear cost: files/s at {largest:,} / at 2,000 = {rate[largest] / rate[2000]:.2f} "
                  "(target >= 0.8)")

        n, wall, cpu, requests, work, corpus, env = rows[-1]
        facade = asyncio.run(in_process(corpus, work / "facade", url))
        print(f"  in-process facade, {n:,} files: {n / facade:6.1f} files/s; CLI/in-process = "
              f"{(n / wall) / (n / facade):.2f} (target >= 0.9: the CLI within 10 %)")

        llm = llm_venv(tmp_path)
        if llm is not None:
            l_wall, l_cpu, l_requests = run_llm(llm, corpus, url, work)
            print(f"  llm embed-multi --files, {n:,} files: {n / l_wall:6.1f} files/s, CPU {l_cpu / n * 1000:5.2f} "
                  f"ms/file, {l_requests:,} requests; ktui/llm = {(n / wall) / (n / l_wall):.2f} (target >= 1.0)")

        # start-up, same run: the 2,000-file base (or the smallest one) is the one searched
        _, _, _, _, swork, _, senv = next((r for r in rows if r[0] == 2000), rows[0])
        # with bytecode, as an installed wheel runs (see test_bench_startup.py, which measures
        # this in interleaved rounds, and the TUI's first frame)
        senv = {k: v for k, v in senv.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([sys.executable, "-m", "ktui", "search", "Bench", "warm up"], env=senv, capture_output=True)
        numpy = median_wall([sys.executable, "-c", "import numpy"], senv)
        print(f"\nstart-up, whole process, median of 5 (python -c 'import numpy' = {numpy * 1000:.0f} ms)")
        for label, args, target in (
            ("ktui search", ["search", "Bench", "vector search terminal"], 2.5),
            ("ktui base list", ["base", "list"], None),
            ("ktui --help", ["--help"], None),
        ):
            seconds = median_wall([sys.executable, "-m", "ktui", *args], senv)
            goal = f" (target <= {target}x)" if target else ""
            print(f"  {label}: {seconds * 1000:6.0f} ms = {seconds / numpy:.2f}x numpy{goal}")
    finally:
        server.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)

"""Embedding benchmarks: builtin throughput, cache-hit cost, HTTP provider throughput.

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_embeddings.py -m benchmark -s
Each figure is printed next to its target and compared with a baseline measured in
the same run; nothing here asserts timing.

Targets (chosen for a 2-core laptop-class machine):
  * builtin::wordllama        >= 200 chunks/s for ~1,000-token chunks
  * memory cache hit          <= 50 µs per text, and >= 20x cheaper than a builtin miss
  * disk (SQLite) cache hit   <= 200 µs per text
  * OpenAI-compatible provider against the local test server >= 1,000 chunks/s (200-token chunks)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

import numpy as np
import pytest

from ktui.core.config import EmbeddingSettings, ProviderConfig, Settings
from ktui.core.embeddings import EmbeddingService, builtin
from tests.support.embedding_server import start_embedding_server

pytestmark = pytest.mark.benchmark

WORDS = (  # noqa: SIM905 - a readable word list
    "the of and to in is was for that on with as by at from this be are it an or which have has not but "
    "their more can also its other new one were been all into first after two most such when some these used "
    "they may time would between during than only over about there who many years number known three system "
    "part state well where being use like world city under them high later both people made while however area "
    "called each since became form name through including large several work found then same government because "
    "although following search index vector embedding knowledge document semantic model terminal keyboard local"
).split()


def make_chunks(n: int, tokens: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(tokens)]
        words[0] = f"chunk{i}"  # every chunk distinct
        out.append(" ".join(words))
    return out


def report(name: str, value: float, unit: str, target: str, extra: str = "") -> None:
    print(f"  {name:<44} {value:>10.1f} {unit:<10} (target {target}){'  ' + extra if extra else ''}")


def _settings(tmp_path, **emb) -> Settings:
    return Settings(data_dir=tmp_path, auto_ollama=False, embeddings=EmbeddingSettings(**emb))


async def test_bench_builtin_throughput(tmp_path):
    model = builtin.load_model()
    chunks = make_chunks(512, 1000)
    avg_tokens = np.mean([len(e.ids) for e in model.tokenizer.encode_batch(chunks[:20], add_special_tokens=False)])
    model.embed(chunks[:8])  # warm up

    t = time.perf_counter()
    model.embed(chunks)
    raw = len(chunks) / (time.perf_counter() - t)

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    root.handlers[:] = handlers
    root.setLevel(level)
    ref = WordLlamaInference(model.table, Tokenizer.from_file(str(builtin.package_dir() / builtin.TOKENIZER_FILE)))
    t = time.perf_counter()
    ref.embed(chunks[:128], norm=True)
    baseline = 128 / (time.perf_counter() - t)

    svc = EmbeddingService(_settings(tmp_path))
    fresh = make_chunks(512, 1000, seed=1)
    t = time.perf_counter()
    await svc.embed("builtin::wordllama", fresh)
    service_rate = len(fresh) / (time.perf_counter() - t)
    await svc.aclose()

    print(f"\nbuiltin::wordllama, {avg_tokens:.0f}-token chunks")
    report("model only, 1 call (our pooling)", raw, "chunks/s", ">= 200", f"{raw / baseline:.1f}x WordLlama.embed() = {baseline:.0f}/s")
    report("EmbeddingService (batches of 64, 2 threads)", service_rate, "chunks/s", ">= 200",
           f"{service_rate / raw:.2f}x model only")


async def test_bench_cache_hit_cost(tmp_path):
    n = 2000
    texts = make_chunks(n, 200, seed=2)
    svc = EmbeddingService(_settings(tmp_path))
    t = time.perf_counter()
    await svc.embed("builtin::wordllama", texts)
    miss_us = (time.perf_counter() - t) / n * 1e6

    rounds = 5
    t = time.perf_counter()
    for _ in range(rounds):
        await svc.embed("builtin::wordllama", texts)
    mem_us = (time.perf_counter() - t) / (n * rounds) * 1e6
    await svc.aclose()

    disk_svc = EmbeddingService(_settings(tmp_path))  # empty memory LRU, same SQLite file
    t = time.perf_counter()
    await disk_svc.embed("builtin::wordllama", texts)
    disk_us = (time.perf_counter() - t) / n * 1e6
    await disk_svc.aclose()

    print("\nembedding cache (200-token chunks, builtin::wordllama)")
    report("miss (embed + cache write)", miss_us, "µs/text", "baseline")
    report("memory LRU hit", mem_us, "µs/text", "<= 50", f"{miss_us / mem_us:.0f}x cheaper than a miss (target >= 20x)")
    report("SQLite hit (cold memory)", disk_us, "µs/text", "<= 200", f"{miss_us / disk_us:.1f}x cheaper than a miss")


async def test_bench_http_provider(tmp_path):
    handle = start_embedding_server(256, subprocess=True)
    try:
        cfg = ProviderConfig(name="local", kind="openai", base_url=handle.url, concurrency=4)
        settings = Settings(data_dir=tmp_path, auto_ollama=False, providers={"local": cfg},
                            embeddings=EmbeddingSettings(persistent_cache_entries=0))
        svc = EmbeddingService(settings)
        await svc.embed("local::m", ["warm up"])
        results = {}
        for tokens in (200, 1000):
            chunks = make_chunks(2048, tokens, seed=tokens)
            t = time.perf_counter()
            await svc.embed("local::m", chunks)
            results[tokens] = len(chunks) / (time.perf_counter() - t)
        await svc.aclose()
    finally:
        handle.stop()
    print("\nOpenAI-compatible provider -> local test server (subprocess, 256 dims, batch 64, concurrency 4)")
    report("200-token chunks", results[200], "chunks/s", ">= 1000")
    report("1,000-token chunks", results[1000], "chunks/s", "(info)", f"{results[1000] / results[200]:.2f}x the 200-token rate")


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(test_bench_builtin_throughput(__import__("pathlib").Path("/tmp")))

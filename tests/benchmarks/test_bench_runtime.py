"""Runtime benchmark: index 2,000 Markdown files end to end and watch the event loop.

Targets (issue 5): >= 1,000 chunks/s end to end through a zero-latency embedding
server on 127.0.0.1; the longest event-loop stall during indexing <= 100 ms.
Baseline in the same run: the same chunk texts embedded directly through the
embedding service (no reading, chunking, store or status writes), so the ratio
shows what the pipeline costs on top of the embedder itself.

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_runtime.py -m benchmark -s
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from ktui.core.embeddings import EmbeddingService
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus
from tests.support.embedding_server import start_embedding_server
from tests.support.services import FAKE_MODEL, fake_settings, open_service

pytestmark = pytest.mark.benchmark

FILES = 2000
DIMS = 384
WORDS = ("knowledge base search vector chunk embedding terminal keyboard folder sitemap note "
         "python sqlite index query ranking hybrid fusion model server local offline fast").split()


def make_corpus(root: Path, n: int = FILES) -> int:
    rng = random.Random(7)
    total = 0
    for i in range(n):
        parts = [f"# Document {i}\n"]
        for s in range(6):
            parts.append(f"\n## Section {s}\n\n")
            parts.append(" ".join(rng.choice(WORDS) for _ in range(110)) + ".\n")
        text = "".join(parts)
        path = root / f"d{i // 100:02d}" / f"doc{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        total += len(text.encode())
    return total


class StallMonitor:
    """Measures how late a 5 ms ticker wakes up: the longest event-loop stall."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.worst = 0.0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.interval)
            self.worst = max(self.worst, loop.time() - start - self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_index_2000_markdown_files(tmp_path):
    corpus = tmp_path / "corpus"
    size = make_corpus(corpus)
    server = start_embedding_server(DIMS, subprocess=True)
    try:
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Bench", chunk_size=256, chunk_overlap=32)
            monitor = StallMonitor()
            monitor.start()
            t0 = time.perf_counter()
            await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
            assert await ks.wait_idle(timeout=600)
            elapsed = time.perf_counter() - t0
            await monitor.stop()
            items = []
            page = 1
            while True:
                batch = await ks.list_items(base.id, group_id=ANY_GROUP, page=page, limit=100)
                items += batch.items
                if page >= batch.pages:
                    break
                page += 1
            assert all(i.status == ItemStatus.COMPLETED for i in items)
            requests = server.request_count
            root = [i for i in items if i.group_id is None][0]
            chunks = await ks.list_item_chunks(base.id, root.id)
            texts = [c.text for c in chunks]

            # live folders (issue 8): re-indexing the unchanged folder reads and embeds nothing
            embedded_before = server.texts_embedded
            t2 = time.perf_counter()
            await ks.reindex_items(base.id, [root.id])
            assert await ks.wait_idle(timeout=600)
            refresh = time.perf_counter() - t2
            refresh_embeds = server.texts_embedded - embedded_before
            problems = await ks.check_invariants()

        # baseline: the embedder alone, same texts, no cache
        settings = fake_settings(tmp_path / "baseline", server.url)
        settings = settings.with_(embeddings=settings.embeddings.__class__(memory_cache_entries=0,
                                                                          persistent_cache_entries=0))
        embedder = EmbeddingService(settings)
        t1 = time.perf_counter()
        await embedder.embed(FAKE_MODEL, texts)
        baseline = time.perf_counter() - t1
        await embedder.aclose()
    finally:
        server.stop()

    rate = len(texts) / elapsed
    base_rate = len(texts) / baseline
    print()
    print(f"corpus: {FILES} files, {size / 1e6:.1f} MB, {len(texts)} chunks (chunk_size 256)")
    print(f"indexing end to end: {elapsed:.2f} s = {rate:,.0f} chunks/s   (target >= 1,000 chunks/s)")
    print(f"embedding requests: {requests} for {len(texts)} chunks ({len(texts) / max(requests, 1):.1f} per request)")
    print(f"baseline, embedder alone: {base_rate:,.0f} chunks/s; pipeline/embedder ratio {rate / base_rate:.2f}")
    print(f"longest event-loop stall: {monitor.worst * 1000:.1f} ms   (target <= 100 ms)")
    print(f"re-index of the unchanged folder: {refresh:.2f} s = {refresh / elapsed:.1%} of the first indexing, "
          f"{refresh_embeds} texts embedded   (target: 0 embeddings, a small fraction of the time)")
    print(f"invariant violations: {len(problems)}")
    assert problems == []

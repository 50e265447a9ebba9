"""The parse pool: file reading in worker processes, contained when a parser misbehaves."""

from __future__ import annotations

import asyncio

import pytest

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest.pipeline import read_and_chunk_file
from ktui.core.models import FileItemData
from ktui.core.runtime.parse_pool import ParsePool


def file_data(path) -> FileItemData:
    return FileItemData(path=str(path), source=str(path))


async def call(pool: ParsePool, path, settings: IngestSettings | None = None):
    return await pool.run(str(path), "read_and_chunk_file", read_and_chunk_file,
                          file_data(path), "item-1", settings or IngestSettings(), 256, 32)


async def test_a_worker_process_reads_and_chunks_like_the_thread_path(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n\n" + "Some words about kites. " * 200)
    pool = ParsePool(workers=1, timeout=60)
    try:
        chunks, recorded = await call(pool, doc)
        in_thread = await call(ParsePool(workers=0, timeout=60), doc)
        assert [c.text for c in chunks] == [c.text for c in in_thread[0]]
        assert recorded.sha256 and recorded.size == doc.stat().st_size and recorded.chunking == "256/32"
        # a reader error comes back as the same clear IngestError
        (tmp_path / "empty.md").write_text("")
        with pytest.raises(IngestError, match="empty"):
            await call(pool, tmp_path / "empty.md")
        assert (await call(pool, doc))[0]  # and the worker keeps serving
    finally:
        await pool.close()


async def test_a_parser_running_past_the_timeout_is_stopped_and_the_pool_recovers(tmp_path):
    big = tmp_path / "big.md"
    big.write_text("word " * 2_000_000)
    small = tmp_path / "small.md"
    small.write_text("a small file about kites")
    pool = ParsePool(workers=1, timeout=0.05)
    try:
        with pytest.raises(IngestError, match="longer than"):
            await call(pool, big)
        pool.timeout = 60
        chunks, _ = await call(pool, small)
        assert chunks[0].text.startswith("a small file")
    finally:
        await pool.close()


async def test_a_crashed_worker_fails_only_its_item(tmp_path):
    big = tmp_path / "big.md"
    big.write_text("word " * 2_000_000)
    small = tmp_path / "small.md"
    small.write_text("another small file")
    pool = ParsePool(workers=1, timeout=60)
    try:
        await call(pool, small)  # start the worker
        (worker,) = pool._all
        task = asyncio.ensure_future(call(pool, big))
        await asyncio.sleep(0.2)
        worker.process.kill()  # the parser process dies mid-read
        with pytest.raises(IngestError, match="crashed"):
            await task
        chunks, _ = await call(pool, small)
        assert chunks[0].text == "another small file"
    finally:
        await pool.close()

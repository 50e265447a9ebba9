"""The parse pool: file reading in worker processes, contained when a parser misbehaves."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest.pipeline import read_and_chunk_file
from ktui.core.models import FileItemData
from ktui.core.runtime.parse_pool import ParsePool
from tests.support.processes import alive


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
        while pool._idle.qsize():  # a condition, not a pause: the request has the worker
            await asyncio.sleep(0)
        worker.process.kill()  # the parser process dies mid-read (reading 10 MB takes far longer)
        with pytest.raises(IngestError, match="crashed"):
            await task
        chunks, _ = await call(pool, small)
        assert chunks[0].text == "another small file"
    finally:
        await pool.close()



@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_blocked_worker_does_not_outlive_the_process_that_started_it():
    # The worker's stdin stays open (this test holds the write end), so it never
    # sees EOF: exactly a worker stuck in a parser when ktui is killed.
    read_end, write_end = os.pipe()
    parent_code = (
        "import subprocess, sys, time\n"
        "from ktui.core.runtime.parse_pool import worker_launch\n"
        "command, env = worker_launch()\n"
        "w = subprocess.Popen(command, env=env,"
        " stdin=int(sys.argv[1]), stdout=subprocess.DEVNULL, pass_fds=(int(sys.argv[1]),))\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(3600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code, str(read_end)],
                              stdout=subprocess.PIPE, pass_fds=(read_end,), text=True)
    try:
        os.close(read_end)
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        assert alive(worker_pid)
        parent.kill()  # SIGKILL: no clean-up of any kind in the parent
        parent.wait()
        deadline = time.monotonic() + 60  # the worker looks once a second; the deadline only bounds a failure
        while alive(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker_pid), "the parse worker outlived the process that started it"
    finally:
        os.close(write_end)
        if parent.poll() is None:
            parent.kill()

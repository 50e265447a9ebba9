"""Read-ahead: the parse worker reads the next queued files while running leaves embed
and write; a read is used only while the file is unchanged. Real files, a real parse
worker process, SQLite and an embedding server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os

import pytest

from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import open_service as _open_service
from tests.support.services import write_files

server = embedding_server_fixture(32)


@pytest.fixture(autouse=True)
def one_file_at_a_time(monkeypatch):
    """Read-ahead serves the files that run one at a time; plain-text files are batched
    (core/runtime/batches.py, tested in test_batches.py), so batching is off here."""
    monkeypatch.setattr("ktui.core.runtime.service.BATCH_FILES", 1)


def open_service(data_dir, server_url, **overrides):
    """Read-ahead runs only with `ingest.pipelining` (on by default since issue 17's
    measurements): these tests are about it, so they keep it on whatever the default."""
    from dataclasses import replace

    from ktui.core.config import IngestSettings

    overrides["ingest"] = replace(overrides.get("ingest", IngestSettings()), pipelining=True)
    return _open_service(data_dir, server_url, **overrides)


async def leaves_by_path(ks, base_id) -> dict[str, object]:
    page = await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)
    return {i.data.path: i for i in page.items if i.type == "file"}


async def wait_for(predicate) -> None:
    """Poll until `predicate()` holds. No deadline of its own: how long a parse worker
    takes to start depends on the machine's load, and pytest-timeout bounds the test."""
    while not predicate():
        await asyncio.sleep(0.01)


async def test_a_folder_is_read_ahead_and_every_item_gets_its_own_text(tmp_path, server):
    files = {f"doc{i:02d}.md": f"# Document {i}\n\nunique marker token{i:02d} and shared words.\n" for i in range(30)}
    root = write_files(tmp_path / "corpus", files)
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Ahead")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])
        assert await ks.wait_idle(timeout=30)
        assert ks._runtime.read_ahead.used > 0  # the worker read files before their tasks asked
        for path, item in (await leaves_by_path(ks, base.id)).items():
            assert item.status == ItemStatus.COMPLETED
            number = path[-5:-3]
            texts = " ".join(c.text for c in await ks.list_item_chunks(base.id, item.id))
            assert f"token{number}" in texts and texts.count("token") == 1  # its own text, nobody else's
        assert await ks.check_invariants() == []


@pytest.mark.parametrize("change", ["append", "same size, mtime restored"])
async def test_a_file_changed_after_it_was_read_ahead_is_read_again(tmp_path, server, change):
    root = write_files(tmp_path / "corpus", {"a.md": "first file, first words\n", "b.md": "second file, old words\n"})
    async with open_service(tmp_path / "data", server.url, concurrency=1) as ks:
        base = await ks.create_base("Stale")
        runtime = ks._runtime
        lock = runtime.lock(base.id)
        await lock.acquire()  # the first leaf stops at its write; the second waits in the queue
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])

        def second_read_ahead() -> bool:
            return any(a.task.done() for a in runtime.read_ahead._ahead.values())

        await wait_for(second_read_ahead)
        (waiting_id,) = runtime.read_ahead._ahead
        waiting = (await ks.get_item(waiting_id)).data.path
        if change == "append":
            with open(waiting, "a", encoding="utf-8") as fh:
                fh.write("appended after the read-ahead: fresh marker\n")
        else:  # what `cp -p` or a sync tool does: new content, same size, the old mtime put back
            before = os.stat(waiting)
            old_text = open(waiting, encoding="utf-8").read()
            new_text = ("fresh marker " + old_text)[: len(old_text)]
            with open(waiting, "w", encoding="utf-8") as fh:
                fh.write(new_text)
            os.utime(waiting, ns=(before.st_atime_ns, before.st_mtime_ns))
            assert os.stat(waiting).st_size == before.st_size
        lock.release()
        assert await ks.wait_idle(timeout=30)
        item = (await leaves_by_path(ks, base.id))[waiting]
        texts = " ".join(c.text for c in await ks.list_item_chunks(base.id, item.id))
        assert "fresh marker" in texts
        assert runtime.read_ahead.stale == 1 and runtime.read_ahead.used == 0
        assert item.data.size == len(open(waiting, "rb").read())  # the record matches what was indexed


async def test_no_read_ahead_without_worker_processes(tmp_path, server):
    from ktui.core.config import IngestSettings

    root = write_files(tmp_path / "corpus", {f"n{i}.txt": f"note number {i}\n" for i in range(12)})
    async with open_service(tmp_path / "data", server.url, ingest=IngestSettings(parse_workers=0)) as ks:
        base = await ks.create_base("Threads")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])
        assert await ks.wait_idle(timeout=30)
        assert ks._runtime.read_ahead.used == 0 and not ks._runtime.read_ahead._ahead
        assert {i.status for i in (await leaves_by_path(ks, base.id)).values()} == {ItemStatus.COMPLETED}


def big_text(mb: int) -> str:
    line = "slow parsing words fill this file until the parser runs past its timeout\n"
    return line * (mb * 1024 * 1024 // len(line))


def count_worker_starts(runtime) -> list:
    """Record every parse worker process the pool starts (the real ones)."""
    started: list = []
    pool = runtime.parse_pool
    real_start = pool._start

    async def start():
        worker = await real_start()
        started.append(worker.process)
        return worker

    pool._start = start
    return started


async def test_a_read_ahead_that_timed_out_fails_the_item_without_a_second_timeout(tmp_path, server):
    from ktui.core.config import IngestSettings

    root = write_files(tmp_path / "corpus", {"a_small.txt": "a small file\n", "b_big.txt": big_text(20)})
    ingest = IngestSettings(parse_timeout=0.3)
    async with open_service(tmp_path / "data", server.url, concurrency=1, ingest=ingest) as ks:
        started = count_worker_starts(ks._runtime)
        base = await ks.create_base("Timeout")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])
        assert await ks.wait_idle(timeout=30)
        leaves = await leaves_by_path(ks, base.id)
        big = leaves[str(root / "b_big.txt")]
        assert big.status == ItemStatus.FAILED and "took longer than 0.3 s" in big.error
        assert leaves[str(root / "a_small.txt")].status == ItemStatus.COMPLETED
        # the small file's worker timed out reading the big one ahead and was replaced once,
        # by nobody: the big file's task reported that timeout instead of reading it again
        assert len(started) == 1


async def test_closing_calls_off_read_aheads_and_leaves_no_parse_worker_behind(tmp_path, server):
    root = write_files(tmp_path / "corpus", {f"f{i}.txt": big_text(4) for i in range(6)})
    async with open_service(tmp_path / "data", server.url, concurrency=1) as ks:
        started = count_worker_starts(ks._runtime)
        base = await ks.create_base("Closing")
        lock = ks._runtime.lock(base.id)
        await lock.acquire()  # the first leaf stops at its write, so the read-ahead cannot be used up first
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])
        await wait_for(lambda: bool(ks._runtime.read_ahead._ahead))
        lock.release()  # close while read-aheads are pending
    assert started and all(p.returncode is not None for p in started)  # every worker ended with the service


@pytest.mark.slow
async def test_a_scan_read_ahead_counts_its_pages_only_once_its_task_runs(tmp_path, server):
    """OCR progress of a read-ahead is held back while the item is queued, and handed to
    its task when the task takes the read: the item never looks as if it ran early."""
    from ktui.core.config import OcrSettings
    from ktui.core.models import ItemChanged
    from tests.support.ocr_gate import GatedTesseract
    from tests.support.ocr_pages import PageSpec, page_text, render_lines, save_multipage

    root = write_files(tmp_path / "corpus", {"a.md": "typed notes come first\n"})
    pages = [render_lines(page_text(seed, lines=3, words_per_line=6), PageSpec(height=360)) for seed in (41, 42, 43)]
    save_multipage([p.image for p in pages], root / "b.tiff")
    tesseract = GatedTesseract(tmp_path / "bin", hold=2)
    ocr = OcrSettings(tesseract=str(tesseract.command))
    async with open_service(tmp_path / "data", server.url, concurrency=1, ocr=ocr) as ks:
        base = await ks.create_base("Ahead OCR")
        runtime = ks._runtime
        seen: list[ItemChanged] = []

        async def listen() -> None:
            async for event in ks.subscribe():
                if isinstance(event, ItemChanged) and event.ocr_pages is not None:
                    seen.append(event)

        listener = asyncio.create_task(listen())
        lock = runtime.lock(base.id)
        await lock.acquire()  # a.md stops at its write; b.tiff waits in the queue, read ahead
        try:
            await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])
            await wait_for(lambda: tesseract.counter.exists() and tesseract.counter.read_text().strip() == "2")
            scan = (await leaves_by_path(ks, base.id))[str(root / "b.tiff")]
            assert scan.id in runtime.read_ahead._ahead and scan.phase is None  # queued, not reading
            assert seen == []  # page 1 is recognised, but the item is still queued: nobody hears of it
            lock.release()
            await wait_for(lambda: any(e.item_id == scan.id for e in seen))
            assert seen[0].status == ItemStatus.PROCESSING and seen[0].ocr_pages == (1, 3)
        finally:
            if lock.locked():
                lock.release()
            await tesseract.release()
        assert await ks.wait_idle(timeout=120)
        listener.cancel()
        done = await ks.get_item(scan.id)
    assert done.status == ItemStatus.COMPLETED and done.data.ocr["pages"] == "1-3"
    assert runtime.read_ahead.used == 1
    assert [e.ocr_pages for e in seen][-1] == (3, 3) and all(e.item_id == scan.id for e in seen)

"""Read-ahead: the parse worker reads the next queued files while running leaves embed
and write; a read is used only while the file is unchanged. Real files, a real parse
worker process, SQLite and an embedding server on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest

from core.models import ANY_GROUP, ItemInput, ItemStatus
from tests.support.embedding_server import start_embedding_server
from tests.support.services import open_service, write_files


@pytest.fixture
def server():
    handle = start_embedding_server(32)
    yield handle
    handle.stop()


async def leaves_by_path(ks, base_id) -> dict[str, object]:
    page = await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)
    return {i.data.path: i for i in page.items if i.type == "file"}


async def wait_for(predicate, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached")
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


async def test_a_file_changed_after_it_was_read_ahead_is_read_again(tmp_path, server):
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
        with open(waiting, "a", encoding="utf-8") as fh:
            fh.write("appended after the read-ahead: fresh marker\n")
        lock.release()
        assert await ks.wait_idle(timeout=30)
        item = (await leaves_by_path(ks, base.id))[waiting]
        texts = " ".join(c.text for c in await ks.list_item_chunks(base.id, item.id))
        assert "fresh marker" in texts
        assert runtime.read_ahead.stale == 1 and runtime.read_ahead.used == 0
        assert item.data.size == len(open(waiting, "rb").read())  # the record matches what was indexed


async def test_no_read_ahead_without_worker_processes(tmp_path, server):
    from core.config import IngestSettings

    root = write_files(tmp_path / "corpus", {f"n{i}.txt": f"note number {i}\n" for i in range(12)})
    async with open_service(tmp_path / "data", server.url, ingest=IngestSettings(parse_workers=0)) as ks:
        base = await ks.create_base("Threads")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])
        assert await ks.wait_idle(timeout=30)
        assert ks._runtime.read_ahead.used == 0 and not ks._runtime.read_ahead._ahead
        assert {i.status for i in (await leaves_by_path(ks, base.id)).values()} == {ItemStatus.COMPLETED}

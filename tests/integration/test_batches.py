"""Plain-text files indexed in batches (core/runtime/batches.py), on a real SQLite store
and the real embedding test server: each file still ends on its own.

The embedding step is held with a gate in front of the real embedding service (an
asyncio.Event, no clock), so a delete, a reindex or a shutdown lands while a batch is
between its parse and its write.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ktui.core.config import IngestSettings
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import open_service, write_files

server = embedding_server_fixture(32)

GOOD = {f"good{i:02d}.md": f"# Good {i}\n\nunique marker token{i:02d} and shared words.\n" for i in range(12)}


def bad_files(root: Path) -> dict[str, bytes]:
    """Files that fail alone, each with the one-file path's message."""
    return {
        "binary.md": b"# x\n\0\0\0\0 binary\0 content\n" * 4,
        # only Unicode whitespace (U+3000): the folder walk's ASCII-whitespace check keeps it
        # (an ASCII-blank file is skipped there as "empty file"), the reader finds no text
        "blank.txt": "\u3000\n".encode() * 30,
        "big.md": b"# big\n\n" + b"word " * 400,  # over the max_file_bytes of these tests
        "bad-utf8.py": b"print('\xff\xfe\xfd')\n" * 3,  # not UTF-8: the detector decodes it (must not fail others)
    }


def make_folder(root: Path) -> Path:
    write_files(root, GOOD)
    for name, data in bad_files(root).items():
        (root / name).write_bytes(data)
    return root


async def leaves(ks, base_id: str) -> dict[str, object]:
    items = (await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)).items
    return {Path(i.data.path).name: i for i in items if i.type.value == "file"}


class EmbedGate:
    """Holds every embedding call until opened (in front of the real service)."""

    def __init__(self, runtime) -> None:
        self.opened = asyncio.Event()
        self.arrived = asyncio.Event()
        self.calls = 0
        real = runtime.embeddings.embed

        async def embed(*args, **kwargs):
            self.calls += 1
            self.arrived.set()
            await self.opened.wait()
            return await real(*args, **kwargs)

        runtime.embeddings.embed = embed


async def until(predicate, timeout: float = 30.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


def settings(**extra):
    return {"concurrency": 1, "ingest": IngestSettings(max_file_bytes=1500), **extra}


async def index_folder(data: Path, folder: Path, url: str, monkeypatch, *, batched: bool):
    monkeypatch.setattr("ktui.core.runtime.service.BATCH_FILES", 64 if batched else 1)
    async with open_service(data, url, **settings()) as ks:
        base = await ks.create_base("B")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=60)
        assert await ks.check_invariants() == []
        found = {name: (i.status, i.error) for name, i in (await leaves(ks, base.id)).items()}
        texts = {name: " ".join(c.text for c in await ks.list_item_chunks(base.id, i.id))
                 for name, i in (await leaves(ks, base.id)).items()}
        return found, texts, ks._runtime.batches.files


async def test_a_batch_of_good_and_bad_files_fails_each_bad_one_alone_with_the_one_file_message(
        tmp_path, server, monkeypatch):
    folder = make_folder(tmp_path / "corpus")
    batched, texts, files = await index_folder(tmp_path / "a", folder, server.url, monkeypatch, batched=True)
    single, single_texts, none = await index_folder(tmp_path / "b", folder, server.url, monkeypatch, batched=False)
    assert files == len(GOOD) + len(bad_files(folder)) and none == 0
    assert batched == single  # same statuses, same messages
    assert batched["binary.md"][0] == ItemStatus.FAILED and "binary content" in batched["binary.md"][1]
    assert batched["blank.txt"][1].startswith("File has no text content")
    assert batched["big.md"][1].startswith("File is too large")
    for name in GOOD:
        assert batched[name] == (ItemStatus.COMPLETED, None)
        number = name[4:6]
        assert f"token{number}" in texts[name] and texts[name].count("token") == 1  # its own text
    assert texts == single_texts


async def test_an_item_deleted_or_reindexed_while_its_batch_embeds_drops_out_alone(tmp_path, server):
    folder = write_files(tmp_path / "corpus", GOOD)
    async with open_service(tmp_path / "data", server.url, **settings()) as ks:
        gate = EmbedGate(ks._runtime)
        base = await ks.create_base("B")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        await asyncio.wait_for(gate.arrived.wait(), 30)
        files = await leaves(ks, base.id)
        doomed, again = files["good03.md"], files["good07.md"]
        # both return while the batch is still held at its embedding call
        await asyncio.wait_for(ks.delete_items(base.id, [doomed.id]), 30)
        (Path(again.data.path)).write_text("# Again\n\nrewritten marker fresh07.\n", encoding="utf-8")
        await asyncio.wait_for(ks.reindex_items(base.id, [again.id]), 30)
        assert not gate.opened.is_set()
        gate.opened.set()
        assert await ks.wait_idle(timeout=60)
        after = await leaves(ks, base.id)
        assert "good03.md" not in after
        assert {i.status for i in after.values()} == {ItemStatus.COMPLETED}
        text = " ".join(c.text for c in await ks.list_item_chunks(base.id, again.id))
        assert "fresh07" in text and "token07" not in text
        assert await ks.check_invariants() == []
        hits = await ks.search(base.id, "token03", mode="bm25")
        assert not hits.results


async def test_a_provider_error_fails_the_batch_and_a_reindex_completes_it(tmp_path, server):
    folder = write_files(tmp_path / "corpus", GOOD)
    async with open_service(tmp_path / "data", server.url, **settings(max_retries=0)) as ks:
        base = await ks.create_base("B")
        server.faults.fail(status=500, times=1)
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=60)
        files = await leaves(ks, base.id)
        errors = {i.error for i in files.values()}
        assert {i.status for i in files.values()} == {ItemStatus.FAILED} and len(errors) == 1, errors
        assert ks._runtime.batches.batches >= 1
        await ks.reindex_items(base.id, [i.id for i in files.values()])
        assert await ks.wait_idle(timeout=60)
        assert {i.status for i in (await leaves(ks, base.id)).values()} == {ItemStatus.COMPLETED}
        assert await ks.check_invariants() == []


async def test_closing_mid_batch_leaves_nothing_stuck_and_the_next_open_finishes(tmp_path, server):
    folder = write_files(tmp_path / "corpus", GOOD)
    data = tmp_path / "data"
    async with open_service(data, server.url, **settings()) as ks:
        gate = EmbedGate(ks._runtime)
        base = await ks.create_base("B")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        await asyncio.wait_for(gate.arrived.wait(), 30)
    # closed while held: the batch was cancelled, its items marked interrupted
    async with open_service(data, server.url, **settings()) as ks:
        statuses = {i.status for i in (await leaves(ks, base.id)).values()}
        assert ItemStatus.COMPLETED not in statuses
        assert await ks.wait_idle(timeout=60)  # recovery re-queues them
        assert {i.status for i in (await leaves(ks, base.id)).values()} == {ItemStatus.COMPLETED}
        assert await ks.check_invariants() == []


@pytest.mark.parametrize("pending, expected", [(2, 1), (10, 5), (1000, 64)])
def test_a_batch_never_takes_more_than_its_share_of_the_queue(pending, expected):
    from ktui.core.runtime.queue import TaskKind, TaskQueue

    async def scenario() -> int:
        queue = TaskQueue(lambda task: asyncio.sleep(0), concurrency=2,  # type: ignore[arg-type,return-value]
                          batch_runner=lambda tasks, settle: asyncio.sleep(0), batch_limit=64)  # type: ignore[arg-type,return-value]
        queue.enqueue_many(TaskKind.INDEX_LEAF, "b", [f"i{n}" for n in range(pending)])
        first = queue._pending.popitem(last=False)[1]
        return len(queue._take_batch(first))

    assert asyncio.run(scenario()) == expected

"""Readers beside a writer: one process holds the data directory, others read it.

A reader (`KnowledgeService.open(read_only=True)`, and every reading CLI command)
sees committed state through SQLite's WAL, never takes the lock, never recovers
unfinished work, never writes; a write from a second process is refused with a
message naming the holder and where to reach it (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from ktui.core.errors import DataDirInUseError, ReadOnlyError
from ktui.core.models import ItemInput, ItemStatus
from ktui.core.service import KnowledgeService
from tests.support.embedding_server import embedding_server_fixture
from tests.support.frontends import ServeProcess, Workspace
from tests.support.services import fake_settings

server = embedding_server_fixture(32, scope="module")

SHUTDOWN = "interrupted by shutdown"


def names(data_dir) -> set[str]:
    return {p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*")
            if not p.name.endswith(("-wal", "-shm"))}


async def test_a_reader_sees_what_the_holder_commits_and_never_writes(tmp_path, server):
    settings = fake_settings(tmp_path / "data", server.url)
    async with await KnowledgeService.open(settings=settings) as holder:
        base = await holder.create_base("Notes", search_mode="default")
        await holder.add_items(base.id, [ItemInput("note", {"content": "Sea otters hold hands while they sleep."})])
        assert await holder.wait_idle(timeout=60)
        before = names(tmp_path / "data")
        async with await KnowledgeService.open(settings=settings, read_only=True) as reader:
            first = await reader.search(base.id, "otters sleep")
            assert [r.page_content for r in first.results] == ["Sea otters hold hands while they sleep."]
            # the holder writes again: the reader's next search sees it (its matrix follows the store)
            later = await holder.add_items(base.id, [ItemInput("note", {"content": "Volcanoes erupt molten lava."})])
            assert await holder.wait_idle(timeout=60)
            second = await reader.search(base.id, "volcanoes lava")
            assert second.results[0].item_id == later[0].id
            assert (await reader.get_item(later[0].id)).status == ItemStatus.COMPLETED
            assert (await reader.list_bases()).total == 1
            assert len(await reader.list_item_chunks(base.id, later[0].id)) == 1
            assert (await reader.export_bases([base.id]))["bases"]
            for write in (reader.create_base("Other"), reader.delete_base(base.id),
                          reader.add_items(base.id, [ItemInput("note", {"content": "x"})]),
                          reader.update_base(base.id, {"emoji": "🦦"}), reader.delete_items(base.id, [later[0].id])):
                with pytest.raises(ReadOnlyError, match=r"in use by ktui \(pid \d+\)"):
                    await write
        assert names(tmp_path / "data") == before  # the reader left no file of its own
        with pytest.raises(DataDirInUseError, match=r"in use by ktui \(pid \d+\)"):
            await KnowledgeService.open(settings=settings)


async def test_a_reader_never_recovers_and_the_next_holder_does(tmp_path, server):
    settings = fake_settings(tmp_path / "data", server.url)
    server.faults.delay(0.5)  # every embedding request is slow: closing interrupts the work
    try:
        async with await KnowledgeService.open(settings=settings) as ks:
            base = await ks.create_base("Notes", dimensions=32)
            added = await ks.add_items(base.id, [ItemInput("note", {"content": f"note {n}"}) for n in range(40)])
    finally:
        server.faults.clear()
    ids = [i.id for i in added]
    async with await KnowledgeService.open(settings=settings, read_only=True) as reader:
        assert (await reader.list_bases()).total == 1
        interrupted = [i for i in await asyncio.gather(*(reader.get_item(i) for i in ids)) if i.error == SHUTDOWN]
        assert interrupted  # left as they were: a reader never replays recovery
    async with await KnowledgeService.open(settings=settings, read_only=True) as reader:
        again = [i for i in await asyncio.gather(*(reader.get_item(i) for i in ids)) if i.error == SHUTDOWN]
        assert {i.id for i in again} == {i.id for i in interrupted}
    async with await KnowledgeService.open(settings=settings) as holder:  # the holder recovers, once
        assert await holder.wait_idle(timeout=120)
        done = await asyncio.gather(*(holder.get_item(i) for i in ids))
        assert {i.status for i in done} == {ItemStatus.COMPLETED}


@pytest.mark.slow
def test_cli_reads_beside_a_running_server_are_never_refused_and_writes_name_the_holder(tmp_path, server):
    ws = Workspace(tmp_path, server.url)

    async def populate() -> None:
        async with await KnowledgeService.open(settings=ws.settings()) as ks:
            base = await ks.create_base("Notes")
            await ks.add_items(base.id, [ItemInput("note", {"content": f"Otters note number {n}"}) for n in range(5)])
            assert await ks.wait_idle(timeout=60)

    asyncio.run(populate())
    holder = ServeProcess(ws)
    try:
        commands = [("search", "Notes", "otters", "--json"), ("base", "list", "--json"), ("items", "Notes", "--json"),
                    ("base", "show", "Notes", "--json"), ("base", "export", "Notes")] * 5

        def run(args: tuple[str, ...]) -> subprocess.CompletedProcess:
            return subprocess.run(ws.command(*args), env=ws.env(), cwd=ws.work, capture_output=True, text=True,
                                  timeout=300, check=False)

        with ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(run, commands))
        refused = [r for r in results if r.returncode != 0]
        assert not refused, refused[0].stderr
        searches = [json.loads(r.stdout) for r, c in zip(results, commands, strict=True) if c[0] == "search"]
        assert all(len(s["results"]) == 5 for s in searches)

        write = run(("base", "create", "Second"))
        assert write.returncode == 1
        assert f"in use by ktui serve (pid {holder.proc.pid}) at {holder.url}" in write.stderr
        assert "send writes to it" in write.stderr
    finally:
        holder.stop()

"""Live folders: incremental refresh and watching (issue 8), on real folders and a real service."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from ktui.core.errors import ValidationError
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus, ItemType
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import open_service, write_files

DIMS = 32


server = embedding_server_fixture(DIMS)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_files(tmp_path / "notes", {
        "a.md": "# Alpha\n\nAardvarks dig burrows at night.\n",
        "b.md": "# Beta\n\nBadgers are stocky mammals.\n",
        "sub/c.md": "# Gamma\n\nCapybaras swim in rivers.\n",
    })


async def items_of(ks, base_id):
    return (await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)).items


async def sources_found(ks, base_id, query):
    response = await ks.search(base_id, query, mode="bm25", top_k=20)
    return {r.metadata["source"] for r in response.results}


async def eventually(check, timeout: float = 15.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if await check():
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the folder change was not picked up in time")
        await asyncio.sleep(0.05)


async def test_reindexing_an_unchanged_folder_costs_no_reading_or_embedding(tmp_path, server, folder):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=10)
        files = {i.id: i for i in await items_of(ks, base.id) if i.type == ItemType.FILE}
        assert all(f.data.sha256 and f.data.size and f.data.chunking == "1024/200" for f in files.values())
        embedded = server.texts_embedded
        await ks.reindex_items(base.id, [root.id])
        assert await ks.wait_idle(timeout=10)
        assert server.texts_embedded == embedded
        after = {i.id: i for i in await items_of(ks, base.id) if i.type == ItemType.FILE}
        assert after.keys() == files.keys()
        assert all(after[k].updated_at == files[k].updated_at for k in files)  # not even re-read
        assert (await ks.get_item(root.id)).status == ItemStatus.COMPLETED

        # touched but identical: metadata updated, nothing embedded
        os.utime(folder / "a.md", ns=(1, 1))
        await ks.reindex_items(base.id, [root.id])
        assert await ks.wait_idle(timeout=10)
        assert server.texts_embedded == embedded
        touched = next(i for i in await items_of(ks, base.id) if i.source.endswith("a.md"))
        assert touched.data.mtime_ns == 1


async def test_refresh_applies_new_changed_and_deleted_files(tmp_path, server, folder):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=10)
        (folder / "b.md").write_text("# Beta\n\nBadgers now share the page with bison.\n")
        (folder / "sub" / "c.md").unlink()
        write_files(folder, {"new/d.md": "# Delta\n\nDolphins click and whistle.\n"})
        embedded = server.texts_embedded
        await ks.reindex_items(base.id, [root.id])
        assert await ks.wait_idle(timeout=10)
        assert server.texts_embedded == embedded + 2  # b.md changed, d.md new
        assert await sources_found(ks, base.id, "bison") == {str(folder / "b.md")}
        assert await sources_found(ks, base.id, "capybaras") == set()
        assert await sources_found(ks, base.id, "dolphins") == {str(folder / "new" / "d.md")}
        items = await items_of(ks, base.id)
        dirs = sorted(i.source for i in items if i.type == ItemType.DIRECTORY)
        assert dirs == sorted([str(folder), str(folder / "new")])  # the emptied sub/ is gone
        assert {i.status for i in items} == {ItemStatus.COMPLETED}
        assert await ks.check_invariants() == []


async def test_watched_folder_follows_renames_edits_and_deletes(tmp_path, server, folder):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
        assert await ks.wait_idle(timeout=10)
        assert await sources_found(ks, base.id, "aardvarks") == {str(folder / "a.md")}

        os.rename(folder / "a.md", folder / "renamed.md")
        await eventually(lambda: _found_exactly(ks, base.id, "aardvarks", {str(folder / "renamed.md")}))

        (folder / "b.md").write_text("# Beta\n\nBadgers were replaced by beavers.\n")
        await eventually(lambda: _found_exactly(ks, base.id, "beavers", {str(folder / "b.md")}))
        assert await sources_found(ks, base.id, "stocky") == set()

        # an editor's save-by-rename: write a temporary file, then replace the original
        tmp = folder / ".b.md.swp"
        tmp.write_text("# Beta\n\nBeavers build dams with branches.\n")
        os.replace(tmp, folder / "b.md")
        await eventually(lambda: _found_exactly(ks, base.id, "dams", {str(folder / "b.md")}))

        (folder / "renamed.md").unlink()
        await eventually(lambda: _found_exactly(ks, base.id, "aardvarks", set()))
        assert await ks.wait_idle(timeout=10)
        assert await ks.check_invariants() == []


async def _found_exactly(ks, base_id, query, expected):
    await ks.wait_idle(timeout=10)
    return await sources_found(ks, base_id, query) == expected


async def test_a_burst_of_1000_file_events_is_absorbed(tmp_path, server, folder):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
        assert await ks.wait_idle(timeout=10)
        burst = folder / "burst"
        burst.mkdir()
        for i in range(1000):
            (burst / f"f{i:04d}.txt").write_text(f"burst file number {i} mentions walruses\n")

        async def all_in():
            await ks.wait_idle(timeout=30)
            items = await items_of_all(ks, base.id)
            files = [i for i in items if i.type == ItemType.FILE]
            return len(files) == 1003 and {i.status for i in items} == {ItemStatus.COMPLETED}

        await eventually(all_in, timeout=90)
        assert await ks.wait_idle(timeout=30)
        assert await ks.check_invariants() == []
        assert len(await sources_found(ks, base.id, "walruses")) == 20  # top_k of the search


async def items_of_all(ks, base_id):
    out, page = [], 1
    while True:
        batch = await ks.list_items(base_id, group_id=ANY_GROUP, page=page, limit=100)
        out += batch.items
        if page >= batch.pages:
            return out
        page += 1


async def test_watched_folder_deleted_fails_the_item_and_stays_watched(tmp_path, server, folder):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
        (note,) = await ks.add_items(base.id, [ItemInput("note", {"content": "an unrelated note about owls"})])
        assert await ks.wait_idle(timeout=10)
        shutil.rmtree(folder)

        async def failed():
            await ks.wait_idle(timeout=10)
            return (await ks.get_item(root.id)).status == ItemStatus.FAILED

        await eventually(failed)
        item = await ks.get_item(root.id)
        assert "Directory not found" in item.error
        assert ks._runtime.watcher.watching(root.id)  # still watched: looked for again
        assert (await ks.get_item(root.id)).data.watch
        assert await sources_found(ks, base.id, "aardvarks") == set()  # its files left the index
        assert (await ks.get_item(note.id)).status == ItemStatus.COMPLETED
        assert (await ks.search(base.id, "owls")).results
        assert await ks.check_invariants() == []


async def test_watched_folder_moved_away_and_back_is_refreshed_and_watched_again(tmp_path, server, folder):
    """QA: `mv notes x; mv x notes` then a new file: it must be indexed without a restart."""
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
        assert await ks.wait_idle(timeout=10)
        away = tmp_path / "notes-moved"
        folder.rename(away)

        async def failed():
            await ks.wait_idle(timeout=10)
            return (await ks.get_item(root.id)).status == ItemStatus.FAILED

        await eventually(failed)
        assert ks._runtime.watcher.watching(root.id)
        away.rename(folder)
        await eventually(lambda: _found_exactly(ks, base.id, "aardvarks", {str(folder / "a.md")}))
        (folder / "d.md").write_text("# Delta\n\nDolphins sleep with one eye open.\n")
        await eventually(lambda: _found_exactly(ks, base.id, "dolphins", {str(folder / "d.md")}))
        assert (await ks.get_item(root.id)).status == ItemStatus.COMPLETED
        assert await ks.check_invariants() == []


async def test_watched_folder_moved_away_and_back_at_once_keeps_being_watched(tmp_path, server, folder):
    """The QA repro's fast case: moved back before the watcher looks (the old watch would
    follow the moved directory); a file created afterwards is indexed."""
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
        assert await ks.wait_idle(timeout=10)
        away = tmp_path / "notes-moved"
        folder.rename(away)
        away.rename(folder)
        (folder / "d.md").write_text("# Delta\n\nDolphins sleep with one eye open.\n")
        await eventually(lambda: _found_exactly(ks, base.id, "dolphins", {str(folder / "d.md")}))

        async def settled():
            await ks.wait_idle(timeout=10)
            return (await ks.get_item(root.id)).status == ItemStatus.COMPLETED

        await eventually(settled)
        (folder / "e.md").write_text("# Epsilon\n\nEchidnas lay eggs.\n")
        await eventually(lambda: _found_exactly(ks, base.id, "echidnas", {str(folder / "e.md")}))
        assert await sources_found(ks, base.id, "aardvarks") == {str(folder / "a.md")}
        assert ks._runtime.watcher.watching(root.id)


async def test_watches_resume_and_catch_up_after_a_restart(tmp_path, server, folder):
    data = tmp_path / "data"
    async with open_service(data, server.url) as ks:
        base = await ks.create_base("Notes")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
        assert await ks.wait_idle(timeout=10)
    # changed while ktui was closed
    (folder / "b.md").write_text("# Beta\n\nBison graze on the plains.\n")
    async with open_service(data, server.url) as ks:
        assert ks._runtime.watcher.watching(root.id)
        await eventually(lambda: _found_exactly(ks, base.id, "bison", {str(folder / "b.md")}))
        (folder / "a.md").write_text("# Alpha\n\nAlpacas have soft wool.\n")  # and while it runs
        await eventually(lambda: _found_exactly(ks, base.id, "alpacas", {str(folder / "a.md")}))


async def test_set_watch_toggles_following_a_folder(tmp_path, server, folder):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        (root, note) = await ks.add_items(base.id, [
            ItemInput("directory", {"path": str(folder)}), ItemInput("note", {"content": "n"})])
        assert await ks.wait_idle(timeout=10)
        assert not ks._runtime.watcher.watching(root.id)
        updated = await ks.set_watch(base.id, root.id, True)
        assert updated.data.watch and ks._runtime.watcher.watching(root.id)
        (folder / "e.md").write_text("Eels are long fish.\n")
        await eventually(lambda: _found_exactly(ks, base.id, "eels", {str(folder / "e.md")}))
        await ks.set_watch(base.id, root.id, False)
        assert not ks._runtime.watcher.watching(root.id)
        with pytest.raises(ValidationError, match="directory"):
            await ks.set_watch(base.id, note.id, True)
        with pytest.raises(ValidationError, match="watch"):
            await ks.set_watch(base.id, root.id, "yes")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder: permissions cannot be denied to it")
async def test_permission_denied_on_a_subfolder_skips_it(tmp_path, server, folder):
    secret = folder / "secret"
    secret.mkdir()
    (secret / "x.md").write_text("hidden")
    secret.chmod(0)
    try:
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Notes")
            (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
            assert await ks.wait_idle(timeout=10)
            assert (await ks.get_item(root.id)).status == ItemStatus.COMPLETED
    finally:
        secret.chmod(0o755)

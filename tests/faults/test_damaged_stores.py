"""Damaged stores heal: a corrupt, truncated or missing per-base store, a garbage vector
sidecar, `bases/` replaced by a file, leftovers of an interrupted delete, overlapping
multi-item deletes — and `ktui doctor [--repair]` over all of it.

Real files in a temporary data directory, real SQLite, the real CLI as a subprocess
for what the user reads, the embedding server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3

import pytest

from ktui.core.errors import StoreDamagedError
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus
from tests.cli.test_cli import Ktui, one_error_line
from tests.support.embedding_server import embedding_server_fixture
from tests.support.facades import backend_fixture
from tests.support.services import open_service, write_files

pytestmark = pytest.mark.faults

DIMS = 32
server = embedding_server_fixture(DIMS, scope="module")
# Damage to a store's files is SQLite's: a PostgreSQL store is a table of a server that
# keeps its own files; the overlapping deletes run on both backends.
backend = backend_fixture(__name__, {
    "test_a_damaged_store_is_set_aside_shown_as_needing_a_rebuild_and_rebuilt": "damages the SQLite file",
    "test_a_garbage_vector_sidecar_is_rebuilt_from_the_rows": "the vector sidecar is SQLite's (PostgreSQL: pgvector)",
    "test_leftovers_of_an_interrupted_base_delete_are_removed_at_the_next_open":
        "leftover files; on PostgreSQL a base's table and registry row go in one transaction",
    "test_damage_and_doctor_as_the_user_sees_it": "damages SQLite files",
})


async def _two_bases(data, url):
    async with open_service(data, url) as ks:
        good = await ks.create_base("Good", dimensions=DIMS)
        bad = await ks.create_base("Bad", dimensions=DIMS)
        for base, word in ((good, "albatross"), (bad, "cormorant")):
            await ks.add_items(base.id, [ItemInput("note", {"content": f"The {word} glides over harbour {n}. " * 20})
                                         for n in range(6)])
        assert await ks.wait_idle(timeout=60)
    return good, bad


def _damage(path, how: str) -> None:
    if how == "header":
        with open(path, "r+b") as fh:
            fh.write(os.urandom(8192))
    elif how == "truncated":
        os.truncate(path, 3000)
    elif how == "missing":
        path.unlink()
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["header", "truncated", "missing"])
async def test_a_damaged_store_is_set_aside_shown_as_needing_a_rebuild_and_rebuilt(tmp_path, server, how):
    data = tmp_path / "data"
    good, bad = await _two_bases(data, server.url)
    store_file = data / "bases" / f"{bad.id}.sqlite"
    _damage(store_file, how)

    async with open_service(data, server.url) as ks:
        shown = await ks.get_base(bad.id)
        if how == "missing":
            assert shown.needs_rebuild and "is missing" in shown.store_problem
        with pytest.raises(StoreDamagedError) as caught:
            await ks.search(bad.id, "cormorant", mode="bm25")
        message = str(caught.value)
        assert str(store_file) in message and "needs a rebuild" in message and "reindex BASE --all" in message
        after = await ks.get_base(bad.id)
        assert after.needs_rebuild, "the base says it needs a rebuild"
        kept = [p.name for p in (data / "bases").iterdir() if ".corrupt-" in p.name]
        if how == "missing":
            assert not kept
        else:
            assert kept and all(p.startswith(f"{bad.id}.sqlite.corrupt-") for p in kept), kept
            assert f"kept as {kept[0]}" in after.store_problem or "corrupt" in after.store_problem
        assert not (await ks.get_base(good.id)).needs_rebuild
        assert len((await ks.search(good.id, "albatross", mode="bm25")).results) == 6

        # deleting an item of the broken base works (nothing readable to remove from the store)
        doomed = (await ks.list_items(bad.id, limit=100)).items[0]
        await ks.delete_items(bad.id, [doomed.id])

        roots = (await ks.list_items(bad.id, limit=100)).items
        await ks.reindex_items(bad.id, [r.id for r in roots], force=True)
        assert await ks.wait_idle(timeout=60)
        assert not (await ks.get_base(bad.id)).needs_rebuild
        assert len((await ks.search(bad.id, "cormorant", mode="bm25")).results) == 5
        assert await ks.check_invariants() == []
        for p in kept:
            assert (data / "bases" / p).exists(), "a damaged file is never deleted by a rebuild"


async def test_a_garbage_vector_sidecar_is_rebuilt_from_the_rows(tmp_path, server):
    data = tmp_path / "data"
    good, bad = await _two_bases(data, server.url)
    for sidecar in (data / "bases").glob(f"{bad.id}.vectors*"):
        with open(sidecar, "r+b") as fh:
            fh.write(os.urandom(min(4096, max(16, sidecar.stat().st_size))))
    async with open_service(data, server.url) as ks:
        hits = await ks.search(bad.id, "cormorant glides", mode="default")
        assert len(hits.results) == 6 and not hits.degraded
        assert await ks.check_invariants() == []
        assert (await ks.doctor()).healthy


async def test_leftovers_of_an_interrupted_base_delete_are_removed_at_the_next_open(tmp_path, server):
    data = tmp_path / "data"
    good, bad = await _two_bases(data, server.url)
    # what a kill between "rows deleted" and "files deleted" leaves: files of a base that no longer exists
    con = sqlite3.connect(data / "knowledge.db")
    con.execute("PRAGMA foreign_keys=ON")
    con.execute("DELETE FROM knowledge_base WHERE id = ?", (bad.id,))
    con.commit()
    con.close()
    assert [p for p in (data / "bases").iterdir() if p.name.startswith(bad.id)]
    async with open_service(data, server.url) as ks:
        assert not [p for p in (data / "bases").iterdir() if p.name.startswith(bad.id)]
        assert [p for p in (data / "bases").iterdir() if p.name.startswith(good.id)]
        assert (await ks.doctor()).healthy


async def test_overlapping_multi_item_deletes_and_reindexes_leave_nothing_processing(tmp_path, server):
    folders = {f"f{n}/doc{m}.md": f"Folder {n} document {m} about herons and reeds." for n in range(6) for m in range(3)}
    root = write_files(tmp_path / "src", folders)
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Overlap", dimensions=DIMS)
        for round_ in range(3):
            items = await ks.add_items(base.id, [ItemInput("directory", {"path": str(root / f"f{n}")}) for n in range(6)])
            ids = [i.id for i in items]
            await asyncio.sleep(0)
            results = await asyncio.gather(
                ks.delete_items(base.id, ids[:4]),
                ks.delete_items(base.id, ids[2:]),
                ks.reindex_items(base.id, ids[1:5], force=round_ % 2 == 0),
                return_exceptions=True,
            )
            for result in results:
                assert not isinstance(result, Exception) or "not found" in str(result), result
            assert await ks.wait_idle(timeout=60)
            left = (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).items
            assert not [i for i in left if i.status == ItemStatus.PROCESSING], "processing while idle"
            assert await ks.check_invariants() == []
            remaining = [i.id for i in (await ks.list_items(base.id, limit=100)).items]
            if remaining:
                await ks.delete_items(base.id, remaining)


@pytest.mark.slow
def test_damage_and_doctor_as_the_user_sees_it(tmp_path, server):
    ktui = Ktui(tmp_path, server.url)
    ktui("base", "create", "Good")
    ktui("base", "create", "Bad")
    for base, word in (("Good", "albatross"), ("Bad", "cormorant")):
        notes = [arg for n in range(4) for arg in ("--note", f"The {word} glides over harbour {n}. " * 20)]
        ktui("add", base, *notes, "--wait")
    bad = ktui.json("base", "show", "Bad")
    store_file = ktui.home / "bases" / f"{bad['id']}.sqlite"
    # damage inside: the file opens, pages are garbage
    size = store_file.stat().st_size
    with open(store_file, "r+b") as fh:
        for frac in (0.5, 0.7, 0.9):
            fh.seek(int(size * frac) // 4096 * 4096)
            fh.write(os.urandom(4096))
    stray = ktui.home / "bases" / "01a00000-dead-7000-8000-000000000000.sqlite"
    stray.write_bytes(b"left by a killed delete")

    found = ktui("doctor", rc=1)
    assert "problem  " + str(store_file) in found.stdout and "corrupt" in found.stdout
    assert "repair would: rebuilding base Bad" in found.stdout
    assert "run `ktui doctor --repair` to fix them" in found.stdout
    assert not stray.exists(), "opening the data directory removes files of no base"
    repaired = ktui("doctor", "--repair", "--wait")
    assert "repaired  " + str(store_file) in repaired.stdout
    assert "after the repairs: no problems found" in repaired.stdout
    # the rebuild, followed as `ktui wait` does (those already done when it looks are not counted)
    assert re.search(r"^done: [1-4] completed, 0 failed$", repaired.stderr, re.M), repaired.stderr
    assert ".corrupt-" in " ".join(p.name for p in (ktui.home / "bases").iterdir())
    hits = ktui.json("search", "Bad", "cormorant", "--mode", "bm25")
    assert len(hits["results"]) == 4
    assert ktui("doctor").stdout.strip().endswith("no problems found")

    # a missing store: base show says so, search says so, reindex --all rebuilds it
    store_file.unlink()
    shown = ktui("base", "show", "Bad").stdout
    assert "needs rebuild: store " + str(store_file) + " is missing" in shown
    assert ktui.json("base", "show", "Bad")["needs_rebuild"] is True
    line = one_error_line(ktui("search", "Bad", "cormorant", rc=1).stderr)
    assert "needs a rebuild" in line and str(store_file) in line
    rebuilt = ktui("reindex", "Bad", "--all", "--wait")
    assert "done: 4 completed, 0 failed" in rebuilt.stderr
    assert len(ktui.json("search", "Bad", "cormorant", "--mode", "bm25")["results"]) == 4
    assert "usage" in ktui("reindex", "Bad", rc=2).stderr

    # bases/ replaced by a file: a clear error, not FileExistsError
    bases = ktui.home / "bases"
    moved = ktui.home / "bases.moved"
    bases.rename(moved)
    bases.write_text("not a folder")
    line = one_error_line(ktui("base", "create", "Third", rc=1).stderr)
    assert "is a file, not a folder" in line and "FileExistsError" not in line
    line = one_error_line(ktui("reindex", "Good", "--all", rc=1).stderr)
    assert "is a file, not a folder" in line
    bases.unlink()
    moved.rename(bases)
    assert len(ktui.json("search", "Good", "albatross", "--mode", "bm25")["results"]) == 4

"""StoreManager: files under data_dir/bases, lazy cached opening, corrupt files, destroy and leftovers."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ktui.core.errors import StoreError
from ktui.core.models import Chunk
from ktui.core.store import StoreManager

D = 8


def add(manager: StoreManager, base_id: str, text: str = "hello world") -> list[str]:
    vec = np.random.default_rng(len(base_id)).standard_normal((1, D)).astype(np.float32)
    return manager.get(base_id, D).replace_item_chunks("item", [Chunk(text)], vec)


def test_create_get_and_cache(tmp_path: Path) -> None:
    manager = StoreManager(tmp_path)
    created = manager.create("base-1", D)
    assert (
        created.path == tmp_path / "bases" / "base-1.sqlite" and created.path.is_file()
    )
    assert manager.get("base-1", D) is created
    with pytest.raises(StoreError, match="already exists"):
        manager.create("base-1", D)
    add(manager, "base-1")
    manager.close_all()
    fresh = StoreManager(tmp_path)
    reopened = fresh.get("base-1", D)
    assert reopened is not created and reopened.count() == 1
    with pytest.raises(StoreError, match="already exists"):
        fresh.create("base-1", D)
    fresh.close_all()


def test_missing_base_and_wrong_dimensions(tmp_path: Path) -> None:
    manager = StoreManager(tmp_path)
    with pytest.raises(StoreError, match=r"base-x\.sqlite is missing"):
        manager.get("base-x", D)
    manager.create("base-1", D)
    with pytest.raises(StoreError, match="8-dimension vectors, not 16"):
        manager.get("base-1", 16)
    manager.close_all()
    with pytest.raises(StoreError, match="8-dimension vectors, not 16"):
        StoreManager(tmp_path).get("base-1", 16)


@pytest.mark.parametrize("bad", ["../evil", "a/b", "", "x.y", "a" * 200, ".."])
def test_base_ids_that_could_escape_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(StoreError, match="Invalid base id"):
        StoreManager(tmp_path).create(bad, D)


@pytest.mark.parametrize(
    "garbage",
    [
        b"this is not a database at all" * 100,
        b"",
        b"SQLite format 3\x00" + b"\xff" * 4000,
    ],
    ids=["text", "empty", "bad-header"],
)
def test_corrupt_sqlite_file_names_the_file_and_spares_other_bases(
    tmp_path: Path, garbage: bytes
) -> None:
    manager = StoreManager(tmp_path)
    manager.create("good", D)
    manager.create("bad", D)
    good_ids = add(manager, "good", "good text")
    add(manager, "bad")
    manager.close_all()
    bad_path = tmp_path / "bases" / "bad.sqlite"
    for side in ("-wal", "-shm"):
        Path(str(bad_path) + side).unlink(missing_ok=True)
    bad_path.write_bytes(garbage)

    fresh = StoreManager(tmp_path)
    with pytest.raises(StoreError) as info:
        fresh.get("bad", D)
    assert str(bad_path) in str(info.value)
    good = fresh.get("good", D)
    assert [c for c, _ in good.search_bm25("good", 5)] == good_ids
    assert good.check_invariants() == []
    assert fresh.destroy("bad") == []
    assert not list((tmp_path / "bases").glob("bad.*"))
    fresh.close_all()


def test_sqlite_file_without_the_store_schema(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "bases" / "other.sqlite"
    path.parent.mkdir(parents=True)
    sqlite3.connect(path).execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(StoreError, match=r"other\.sqlite"):
        StoreManager(tmp_path).get("other", D)


def test_destroy_closes_and_removes_every_file_of_the_base_only(tmp_path: Path) -> None:
    manager = StoreManager(tmp_path)
    manager.create("one", D)
    manager.create("one_two", D)
    add(manager, "one")
    add(manager, "one_two")
    manager.get("one", D).search_vector(np.ones(D, np.float32), 1)
    assert len(manager.files_of("one")) >= 4
    store = manager.get("one", D)
    assert manager.destroy("one") == []
    assert manager.files_of("one") == [] and "one" not in manager
    with pytest.raises(StoreError, match="closed"):
        store.count()
    assert (
        manager.get("one_two", D).count() == 1
    )  # a base whose id extends the other's is untouched
    assert manager.destroy("one") == []  # idempotent
    with pytest.raises(StoreError, match="missing"):
        manager.get("one", D)
    manager.close_all()


def test_destroy_reports_files_it_could_not_remove(tmp_path: Path) -> None:
    manager = StoreManager(tmp_path)
    manager.create("b", D)
    add(manager, "b")
    # A directory where a base file should be cannot be unlinked, even by root.
    stuck = tmp_path / "bases" / "b.sqlite-journal"
    stuck.mkdir()
    (stuck / "x").write_text("x")
    leftovers = manager.destroy("b")
    assert leftovers == [str(stuck)]
    assert not (tmp_path / "bases" / "b.sqlite").exists()


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root ignores directory permissions (the test above covers root)",
)
def test_destroy_in_a_read_only_directory_returns_leftovers(tmp_path: Path) -> None:
    manager = StoreManager(tmp_path)
    manager.create("b", D)
    add(manager, "b")
    manager.close_all()
    bases = tmp_path / "bases"
    files = sorted(str(p) for p in bases.glob("b.*"))
    bases.chmod(0o555)
    try:
        assert sorted(StoreManager(tmp_path).destroy("b")) == files
    finally:
        bases.chmod(0o755)

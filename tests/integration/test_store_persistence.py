"""The persisted matrix: reused on reopen, rebuilt when stale, corrupt or truncated, and crash-safe."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from ktui.core.models import Chunk
from ktui.core.store import BaseStore, Tuning
from ktui.core.store.matrix_files import MatrixFiles

D = 24
REPO = Path(__file__).resolve().parents[2]


def vecs(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)


def populate(path: Path, tuning: Tuning | None = None) -> tuple[np.ndarray, list[str]]:
    store = BaseStore.open(path, D, create=True, tuning=tuning)
    data = vecs(600, 1)
    ids: list[str] = []
    for item in range(6):
        part = data[item * 100 : (item + 1) * 100]
        ids += store.replace_item_chunks(
            f"item-{item}", [Chunk(f"text {item} {i}") for i in range(100)], part
        )
    store.delete_items(["item-2"])
    store.close()
    keep = [i for i in range(600) if not 200 <= i < 300]
    return data[keep], [ids[i] for i in keep]


def assert_matches_brute_force(
    store: BaseStore, data: np.ndarray, ids: list[str]
) -> None:
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    for q in vecs(5, 77):
        sims = unit @ (q / np.linalg.norm(q))
        order = np.argsort(-sims)[:10]
        got = store.search_vector(q, 10)
        assert [c for c, _ in got] == [ids[i] for i in order]
        assert np.allclose([s for _, s in got], sims[order], atol=1e-5)


def test_reopen_reuses_the_persisted_matrix(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    data, ids = populate(path)
    store = BaseStore.open(path, D)
    assert store.matrix_info().loaded is False  # lazily loaded
    assert_matches_brute_force(store, data, ids)
    info = store.matrix_info()
    assert (info.source, info.live) == ("file", 500)
    assert store.check_invariants() == []
    store.close()


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda f, p: _flip(f.f32, 12), "header checksum"),
        (lambda f, p: f.i8.write_bytes(f.i8.read_bytes()[: D * 10]), "truncated"),
        (lambda f, p: f.f32.write_bytes(f.f32.read_bytes()[: -D * 4]), "truncated"),
        (lambda f, p: _flip(f.i8, D * 7), "checksum"),
        (lambda f, p: _flip(f.rows, 16 * 3 + 13), "checksum"),
        (lambda f, p: [x.unlink() for x in f.all()], "missing"),
        (lambda f, p: _commit_behind_the_matrix(p), "generation"),
    ],
    ids=[
        "header",
        "i8-truncated",
        "f32-truncated",
        "i8-corrupt",
        "rows-corrupt",
        "deleted",
        "stale-generation",
    ],
)
def test_stale_or_damaged_matrix_is_rebuilt_from_the_blobs(
    tmp_path: Path, damage, reason: str
) -> None:
    path = tmp_path / "b.sqlite"
    data, ids = populate(path)
    damage(MatrixFiles.next_to(path), path)
    store = BaseStore.open(path, D)
    if (
        reason == "generation"
    ):  # a chunk committed while the matrix was not updated (a crash in between)
        data = np.vstack([data, vecs(1, 500)])
        ids = ids + ["late"]
    assert_matches_brute_force(store, data, ids)
    info = store.matrix_info()
    assert info.source == "rebuilt" and reason in (info.reason or "")
    assert store.check_invariants() == []
    store.close()
    again = BaseStore.open(path, D)  # the rebuilt files are trusted next time
    again.load_matrix()
    assert again.matrix_info().source == "file"
    again.close()


def test_matrix_from_another_base_is_not_trusted(tmp_path: Path) -> None:
    populate(tmp_path / "a.sqlite")
    populate(tmp_path / "b.sqlite")
    a, b = (
        MatrixFiles.next_to(tmp_path / "a.sqlite"),
        MatrixFiles.next_to(tmp_path / "b.sqlite"),
    )
    for src, dst in zip(a.all(), b.all(), strict=True):
        dst.write_bytes(src.read_bytes())
    store = BaseStore.open(tmp_path / "b.sqlite", D)
    store.load_matrix()
    assert (
        store.matrix_info().source == "rebuilt"
        and "another store" in store.matrix_info().reason
    )
    store.close()


def test_compaction_is_persisted_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    data, ids = populate(
        path, Tuning(compact_min_dead=50, compact_ratio=0.1)
    )  # the item-2 delete compacts
    assert os.path.getsize(MatrixFiles.next_to(path).i8) == 500 * D
    store = BaseStore.open(
        path, D, tuning=Tuning(compact_min_dead=50, compact_ratio=0.1)
    )
    assert_matches_brute_force(store, data, ids)
    assert store.matrix_info().source == "file" and store.matrix_info().rows == 500
    store.close()


def _flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x5A
    path.write_bytes(bytes(raw))


def _commit_behind_the_matrix(path: Path) -> None:
    """What a SIGKILL between the SQLite commit and the matrix update leaves behind."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN")
    con.execute(
        "INSERT INTO chunk(id, item_id, chunk_index, text, metadata, vector) VALUES ('late', 'item-9', 0, 'late', '{}', ?)",
        (vecs(1, 500)[0].tobytes(),),
    )
    con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.execute("COMMIT")
    con.close()


_WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from ktui.core.models import Chunk
    from ktui.core.store import BaseStore, Tuning
    store = BaseStore.open(sys.argv[1], int(sys.argv[2]), create=sys.argv[3] == "1", tuning=Tuning(compact_min_dead=20))
    rng = np.random.default_rng(int(sys.argv[4]))
    i = 0
    while True:
        item = f"item-{rng.integers(0, 12)}"
        n = int(rng.integers(1, 30))
        store.replace_item_chunks(item, [Chunk(f"w{i} x{j}") for j in range(n)], rng.standard_normal((n, int(sys.argv[2]))).astype(np.float32))
        if i % 5 == 0:
            store.delete_items([f"item-{rng.integers(0, 12)}"])
        i += 1
        if i == 20:
            print("ready", flush=True)
    """
)


def test_sigkill_mid_write_then_reopen_is_consistent(tmp_path: Path) -> None:
    path = tmp_path / "crash.sqlite"
    rng = np.random.default_rng(0)
    for round_ in range(4):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                str(path),
                str(D),
                "1" if round_ == 0 else "0",
                str(round_),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", (
            proc.stderr.read() if proc.stderr else ""
        )
        time.sleep(float(rng.uniform(0.0, 0.3)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = BaseStore.open(path, D)
        assert store.check_invariants() == []
        con = sqlite3.connect(path)
        rows = con.execute("SELECT id, vector FROM chunk").fetchall()
        con.close()
        data = np.stack([np.frombuffer(v, np.float32) for _, v in rows])
        assert_matches_brute_force(store, data, [c for c, _ in rows])
        store.close()

"""A full disk under the vector matrix files raises DiskFullError, like a full disk under SQLite.

The store's SQLite file stays on the ordinary temporary directory; its three matrix
files are moved to a 4 MiB tmpfs the test mounts (root only; skipped where mounting
is not permitted) and linked back, then the tmpfs is filled. A write's rows commit
(SQLite has room), the matrix append hits ENOSPC: the caller must get DiskFullError
naming the matrix file (so the runtime pauses its queue), not a silent drop. Once
there is room again the next use rebuilds the matrix from the committed rows.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ktui.core.errors import DiskFullError
from ktui.core.models import Chunk
from ktui.core.store import BaseStore
from ktui.core.store.matrix_files import MatrixFiles
from tests.faults.support.volumes import fill, tmpfs

pytestmark = [pytest.mark.faults]

D = 64


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)


def test_a_full_disk_while_the_matrix_is_written_raises_disk_full(tmp_path: Path) -> None:
    path = tmp_path / "bases" / "b.sqlite"
    store = BaseStore.open(path, D, create=True)
    try:
        first = store.replace_item_chunks("first", [Chunk(f"first {i}") for i in range(10)], _vectors(10, 1))
        files = MatrixFiles.next_to(path)
        with tmpfs(tmp_path / "vol", "4m") as volume:
            for f in files.all():  # moved while the store is open, so it is reopened below
                moved = volume / f.name
                shutil.copyfile(f, moved)
                f.unlink()
                os.symlink(moved, f)
            store.close()
            store = BaseStore.open(path, D)
            assert store.load_matrix().source == "file"  # the linked files are the store's own
            ballast = fill(volume, leave=0)

            big = 2000  # 2000 x 64 float32 = 512 KB: more than the tmpfs has left
            with pytest.raises(DiskFullError) as raised:
                store.replace_item_chunks("second", [Chunk(f"second {i}") for i in range(big)], _vectors(big, 2))
            assert str(raised.value).startswith("no space left on device: ")
            assert str(files.f32) in str(raised.value) or str(volume) in str(raised.value)

            ballast.unlink()  # room again: the rows were committed, the matrix follows them
            (hit, _score), = store.search_vector(_vectors(2000, 2)[0], k=1)
            assert hit not in first
            assert store.matrix_info().source == "rebuilt"
            assert store.matrix_info().live == 10 + big
            store.close()
            for f in files.all():  # the rebuilt files were renamed over the links: nothing left on the volume
                assert not f.is_symlink()
    finally:
        store.close()

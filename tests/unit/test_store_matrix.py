"""The vector matrix on its own: quantisation, int8 search vs brute force, tombstones, compaction, files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ktui.core.store.matrix import VectorIndex
from ktui.core.store.matrix_files import Expected, MatrixFiles, StaleMatrix, Tuning
from ktui.core.store.vector_search import normalise, quantise, search_snapshot

D = 32


def brute(vectors: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    return np.sort(normalise(vectors) @ normalise(q[None, :])[0])[::-1][:k]


def build(
    tmp_path: Path, vectors: np.ndarray, tuning: Tuning, generation: int = 0
) -> VectorIndex:
    files = MatrixFiles.next_to(tmp_path / "m.sqlite")
    seqs = np.arange(1, len(vectors) + 1)
    return VectorIndex.build(
        files, vectors.shape[1], "a" * 32, generation, tuning, [(seqs, vectors)]
    )


def test_quantise_round_trip_is_within_half_a_step() -> None:
    rows = normalise(np.random.default_rng(0).standard_normal((50, D)))
    q, scales = quantise(rows)
    assert q.dtype == np.int8 and np.abs(q).max() == 127
    assert np.all(np.abs(q * scales[:, None] - rows) <= scales[:, None] / 2 + 1e-7)
    zq, zs = quantise(np.zeros((1, D), np.float32))
    assert not zq.any() and zs[0] == 0


def test_zero_vector_normalises_to_zero() -> None:
    assert not normalise(np.zeros((2, D))).any()


def test_int8_candidates_with_float32_rescoring_match_brute_force(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((40, D))
    data = (
        centres[rng.integers(0, 40, 5000)] + 0.6 * rng.standard_normal((5000, D))
    ).astype(np.float32)
    tuning = Tuning(exact_below=0, rescore=64)
    index = build(tmp_path, data, tuning)
    snap = index.snapshot()
    hits = 0
    for q in rng.standard_normal((50, D)).astype(np.float32):
        seqs, scores = search_snapshot(snap, normalise(q[None, :])[0], 10, tuning)
        truth = np.argsort(-(normalise(data) @ normalise(q[None, :])[0]))[:10]
        hits += len(set((seqs - 1).tolist()) & set(truth.tolist()))
        # returned scores are exact float32 cosines, best first
        assert np.all(np.diff(scores) <= 0)
        assert np.allclose(
            scores, normalise(data[seqs - 1]) @ normalise(q[None, :])[0], atol=1e-5
        )
    assert hits / 500 >= 0.99
    index.close()


def test_tombstones_are_never_returned_and_compaction_keeps_results(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(3)
    data = rng.standard_normal((400, D)).astype(np.float32)
    tuning = Tuning(exact_below=0, compact_min_dead=50, compact_ratio=0.25)
    index = build(tmp_path, data, tuning)
    q = data[10]
    assert index.remove([11, 12, 13, 9999]) == 3  # seq 11 is row 10 (the query itself)
    index.commit(1)
    assert (index.rows, index.live) == (400, 397)
    seqs, scores = search_snapshot(
        index.snapshot(), normalise(q[None, :])[0], 5, tuning
    )
    assert 11 not in seqs.tolist()
    before = (seqs.tolist(), scores.tolist())
    index.remove(range(100, 220))
    index.commit(2)  # 123 tombstones > 0.25 * 400: compacted into fresh files
    assert (index.rows, index.live) == (277, 277)
    alive = [s for s in range(1, 401) if not (s in (11, 12, 13) or 100 <= s < 220)]
    assert index.live_seqs().tolist() == alive
    seqs2, _ = search_snapshot(index.snapshot(), normalise(q[None, :])[0], 5, tuning)
    assert all(s in alive for s in seqs2.tolist())
    expect = brute(data[np.array(alive) - 1], q, 5)
    assert np.allclose(
        search_snapshot(index.snapshot(), normalise(q[None, :])[0], 5, tuning)[1],
        expect,
        atol=1e-5,
    )
    assert before[0][0] in alive
    index.close()


def test_removing_every_row_empties_the_matrix(tmp_path: Path) -> None:
    data = np.random.default_rng(1).standard_normal((20, D)).astype(np.float32)
    index = build(tmp_path, data, Tuning())
    index.remove(range(1, 21))
    index.commit(1)
    assert (index.rows, index.live) == (0, 0)
    assert (
        search_snapshot(index.snapshot(), normalise(data[:1])[0], 3, Tuning())[0].size
        == 0
    )
    index.append(np.array([30]), data[:1])
    index.commit(2)
    assert index.live_seqs().tolist() == [30]
    index.close()


def test_appends_must_keep_seq_order(tmp_path: Path) -> None:
    data = np.random.default_rng(1).standard_normal((3, D)).astype(np.float32)
    index = build(tmp_path, data, Tuning())
    with pytest.raises(ValueError, match="greater"):
        index.append(np.array([2]), data[:1])
    index.close()


def _fetch(data: np.ndarray):
    return lambda seqs: {s: data[s - 1] for s in seqs if 1 <= s <= len(data)}


def test_load_accepts_its_own_files_and_rejects_a_changed_expectation(
    tmp_path: Path,
) -> None:
    data = np.random.default_rng(2).standard_normal((300, D)).astype(np.float32)
    tuning = Tuning()
    built = build(tmp_path, data, tuning, generation=5)
    built.close()
    files = MatrixFiles.next_to(tmp_path / "m.sqlite")
    ok = Expected(dims=D, generation=5, store_uuid="a" * 32, live=300)
    loaded = VectorIndex.load(files, ok, tuning, _fetch(data))
    assert loaded.live == 300 and loaded.generation == 5
    loaded.close()
    for bad, reason in [
        (Expected(D, 6, "a" * 32, 300), "generation"),
        (Expected(D, 5, "b" * 32, 300), "another store"),
        (Expected(D, 5, "a" * 32, 299), "live rows"),
        (Expected(D + 1, 5, "a" * 32, 300), "dimensions"),
    ]:
        with pytest.raises(StaleMatrix, match=reason):
            VectorIndex.load(files, bad, tuning, _fetch(data))
    with pytest.raises(StaleMatrix, match="differs from SQLite"):
        VectorIndex.load(files, ok, tuning, _fetch(data * -1))


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda f: f.f32.write_bytes(f.f32.read_bytes()[:100]), "truncated"),
        (lambda f: _flip(f.f32, 20), "header checksum"),
        (lambda f: f.i8.write_bytes(f.i8.read_bytes()[:-D]), "truncated"),
        (lambda f: _flip(f.i8, 5000), "checksum"),
        (lambda f: _flip(f.rows, 40), "checksum"),
        (lambda f: f.rows.unlink(), "truncated"),
        (lambda f: f.f32.unlink(), "missing"),
        (lambda f: _zero_from(f.f32, 4096), "differs from SQLite"),
    ],
)
def test_damaged_files_are_detected(tmp_path: Path, damage, reason: str) -> None:
    data = np.random.default_rng(4).standard_normal((300, D)).astype(np.float32)
    build(tmp_path, data, Tuning()).close()
    files = MatrixFiles.next_to(tmp_path / "m.sqlite")
    damage(files)
    with pytest.raises(StaleMatrix, match=reason):
        VectorIndex.load(files, Expected(D, 0, "a" * 32, 300), Tuning(), _fetch(data))


def _flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))


def _zero_from(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset:] = bytes(len(raw) - offset)
    path.write_bytes(bytes(raw))

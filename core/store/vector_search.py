"""Exact vector search over a matrix snapshot: int8 candidates, float32 re-scoring.

Runs without any lock on an immutable :class:`Snapshot`. Below `Tuning.exact_below`
rows the float32 rows are scored directly; above it SimSIMD's int8 dot kernels score
every row and the best candidates are re-scored exactly against the memory-mapped
float32 rows, whose pages are let go again now and then (`unmap_touched`) so the
file does not stay resident. Also here: `normalise` and `quantise`, the two
transformations every row goes through.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .matrix_files import HEADER_SIZE, Tuning

try:  # SIMD int8 kernels; the numpy fallback is correct but slower.
    import simsimd as _simsimd
except ImportError:  # pragma: no cover - simsimd is a declared dependency
    _simsimd = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An immutable view for one search, taken under the store lock."""

    i8: np.ndarray  # (n, d) int8
    scales: np.ndarray  # (n,) float32
    seq: np.ndarray  # (n,) int64
    dead: np.ndarray  # positions of tombstones
    live: int
    f32: np.ndarray | None  # (n, d) float32 memmap


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Unit-length float32 rows; an all-zero row stays zero (cosine 0 to everything)."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = (v / norms).astype(np.float32, copy=False)
    return unit


def quantise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 with one scale per row: ``row ~= q * scale``."""
    rows = np.atleast_2d(rows)
    maxabs = (
        np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(len(rows), np.float32)
    )
    scales = (maxabs / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    q = np.rint(rows / safe[:, None])
    np.clip(q, -127, 127, out=q)
    return q.astype(np.int8), scales


def map_rows(path: Path, n: int, dims: int, opened: Any = None) -> np.ndarray:
    """The float32 rows, memory-mapped read-only with MADV_RANDOM.

    Re-scoring touches ~128 scattered rows per query; with the kernel's default
    read-ahead every touched row pulled its neighbours in too, and a few dozen
    queries at 100k x 768 made the whole float32 file resident (+307 MiB against
    293 MiB raw). Random advice reads just the pages asked for, so resident memory
    stays near the int8 copy (and a cold first query reads less)."""
    length = HEADER_SIZE + n * dims * 4
    if opened is not None:  # a reader maps the very file it read the header from
        mapping = _RowMap(opened.fileno(), length, access=mmap.ACCESS_READ)
    else:
        with open(path, "rb") as fh:
            mapping = _RowMap(fh.fileno(), length, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_RANDOM"):  # not on every platform
        mapping.madvise(mmap.MADV_RANDOM)
    return np.ndarray((n, dims), dtype=np.float32, buffer=mapping, offset=HEADER_SIZE)


class _RowMap(mmap.mmap):
    """The float32 file's mapping, counting (roughly) what the queries made resident."""

    touched = 0


FAULT_AROUND_BYTES = 64 * 1024  # what Linux maps per page fault of a cached file ("fault-around")
RESIDENT_BUDGET_BYTES = 32 * 2**20  # float32 pages a base's queries may keep resident


def unmap_touched(rows: np.ndarray, count: int) -> None:
    """Drop the pages re-scoring touched from this process's resident set, now and then.

    MADV_RANDOM stops read-ahead, but the kernel still maps up to 64 KiB of cached
    pages around each fault, so 1,000 queries at 100k x 768 made the whole float32
    file resident all the same (measured: 294 MiB of 293). Once the queries may have
    touched `RESIDENT_BUDGET_BYTES`, one madvise(MADV_DONTNEED) over the mapping lets
    them go: they stay in the page cache (the next touch is a minor fault, not a disk
    read) but stop counting against ktui. One call per few queries, not per row: a
    system call per touched block cost more than the search itself."""
    base: object = rows
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    if not isinstance(base, _RowMap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    base.touched += count * FAULT_AROUND_BYTES
    if base.touched < RESIDENT_BUDGET_BYTES:
        return
    base.touched = 0
    try:
        base.madvise(mmap.MADV_DONTNEED)
    except (OSError, ValueError):  # closed meanwhile, or refused: only memory is at stake
        pass


def search_snapshot(
    snap: Snapshot, query_unit: np.ndarray, k: int, tuning: Tuning
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (seqs, cosine scores) best first. Runs without any lock."""
    n = len(snap.seq)
    if k <= 0 or snap.live == 0 or snap.f32 is None:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    q = np.ascontiguousarray(query_unit, np.float32)
    if n <= tuning.exact_below:
        scores = np.asarray(snap.f32 @ q, dtype=np.float32)
        if len(snap.dead):
            scores[snap.dead] = -np.inf
        cand = _top(scores, min(k, snap.live))
        exact = scores[cand]
    else:
        qi, _ = quantise(q[None, :])
        if _simsimd is not None:
            dots = np.asarray(
                _simsimd.cdist(
                    qi,
                    snap.i8,
                    metric="dot",
                    out_dtype="float32",
                    threads=tuning.threads,
                )
            )[0]
        else:  # pragma: no cover
            dots = (snap.i8.astype(np.int32) @ qi[0].astype(np.int32)).astype(
                np.float32
            )
        approx = dots * snap.scales
        if len(snap.dead):
            approx[snap.dead] = -np.inf
        wanted = min(snap.live, max(tuning.rescore, 4 * k))
        cand = _top(approx, wanted)
        cand.sort()  # ascending positions: sequential reads from the memmap
        exact = np.asarray(snap.f32[cand], dtype=np.float32) @ q
        unmap_touched(snap.f32, len(cand))
    order = np.lexsort((cand, -exact))[:k]
    return snap.seq[cand[order]], exact[order]


def _top(scores: np.ndarray, m: int) -> np.ndarray:
    """Positions of the ``m`` highest finite scores (unordered)."""
    n = len(scores)
    if m >= n:
        idx = np.arange(n)
    else:
        idx = np.argpartition(scores, n - m)[n - m :]
    finite: np.ndarray = idx[np.isfinite(scores[idx])]
    return finite

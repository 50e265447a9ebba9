"""Reading a persisted matrix back, and deciding whether it can be trusted.

`read_matrix` checks the header (magic, version, checksum), the dimensions, store uuid,
write generation and live row count against SQLite, the file sizes, and the checksums
and order of the row table and the int8 rows; `verify_sample` spot-checks a few float32
and int8 rows against their SQLite BLOBs. Anything that does not match raises
`StaleMatrix` saying why, and the caller rebuilds the matrix from SQLite.
"""

from __future__ import annotations

import os
import random
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .matrix_files import (
    _HEADER,
    FLAG_DEAD,
    FORMAT_VERSION,
    HEADER_SIZE,
    MAGIC,
    ROW_DTYPE,
    Expected,
    MatrixFiles,
    StaleMatrix,
    as_bytes,
    crc,
)
from .vector_search import normalise, quantise


@dataclass(frozen=True, slots=True)
class LoadedMatrix:
    """The verified content of a matrix's files (arrays sized with room to append)."""

    n: int
    live: int
    generation: int
    i8: np.ndarray
    scales: np.ndarray
    rows: np.ndarray
    dead: np.ndarray
    i8_crc: int
    rows_crc: int


def read_matrix(f32_file: Any, files: MatrixFiles, expected: Expected) -> LoadedMatrix:
    """The matrix in `files` (header read from the open `f32_file`), or StaleMatrix saying why not."""
    try:
        raw = f32_file.read(HEADER_SIZE)
    except OSError as exc:
        raise StaleMatrix(f"{files.f32.name} cannot be read: {exc}") from exc
    if len(raw) < _HEADER.size + 4:
        raise StaleMatrix(f"{files.f32.name} header is truncated")
    body = raw[: _HEADER.size]
    (stored_crc,) = struct.unpack_from("<I", raw, _HEADER.size)
    if zlib.crc32(body) != stored_crc:
        raise StaleMatrix(f"{files.f32.name} header checksum mismatch")
    magic, version, dims, n, live, generation, uuid_b, i8_crc, rows_crc = _HEADER.unpack(body)
    if magic != MAGIC or version != FORMAT_VERSION:
        raise StaleMatrix(f"{files.f32.name} is not a version {FORMAT_VERSION} matrix file")
    if dims != expected.dims:
        raise StaleMatrix(f"matrix has {dims} dimensions, the store {expected.dims}")
    if uuid_b.decode("ascii", "replace") != expected.store_uuid:
        raise StaleMatrix("matrix belongs to another store")
    if generation != expected.generation:
        raise StaleMatrix(f"matrix generation {generation} != store generation {expected.generation}")
    if live != expected.live:
        raise StaleMatrix(f"matrix has {live} live rows, the store {expected.live}")
    if live > n:
        raise StaleMatrix("matrix header is inconsistent")
    sizes = {p: (os.path.getsize(p) if p.exists() else -1) for p in files.all()}
    need = {
        files.f32: HEADER_SIZE + n * dims * 4,
        files.i8: n * dims,
        files.rows: n * ROW_DTYPE.itemsize,
    }
    for path, size in need.items():
        if sizes[path] < size:
            raise StaleMatrix(f"{path.name} is truncated ({sizes[path]} < {size} bytes)")

    capacity = n + max(64, n // 8)
    rows = np.zeros(capacity, ROW_DTYPE)
    i8 = np.empty((capacity, dims), np.int8)
    scales = np.zeros(capacity, np.float32)
    dead = np.empty(0, np.int64)
    if n:
        with open(files.rows, "rb") as fh:
            got = fh.readinto(as_bytes(rows[:n]))
        if got != n * ROW_DTYPE.itemsize or crc(rows[:n]) != rows_crc:
            raise StaleMatrix(f"{files.rows.name} checksum mismatch")
        with open(files.i8, "rb") as fh:
            got = fh.readinto(as_bytes(i8[:n]))
        if got != n * dims or crc(i8[:n]) != i8_crc:
            raise StaleMatrix(f"{files.i8.name} checksum mismatch")
        seq = rows["seq"][:n]
        if n > 1 and not bool(np.all(np.diff(seq) > 0)):
            raise StaleMatrix(f"{files.rows.name} rows are out of order")
        dead_pos = np.flatnonzero(rows["flags"][:n] & FLAG_DEAD)
        if n - len(dead_pos) != live:
            raise StaleMatrix(f"{files.rows.name} tombstones disagree with the header")
        scales[:n] = rows["scale"][:n]
        dead = dead_pos.astype(np.int64)
    return LoadedMatrix(n, live, generation, i8, scales, rows, dead, i8_crc, rows_crc if n else 0)


def verify_sample(files: MatrixFiles, rows: np.ndarray, i8: np.ndarray, f32: np.ndarray | None, samples: int,
                  fetch_raw: Callable[[list[int]], dict[int, np.ndarray]]) -> None:
    """Spot-check a few float32 and int8 rows against SQLite (catches a swapped or zeroed file).

    `rows`, `i8` and `f32` are the matrix's first n rows (n = len(rows))."""
    live_pos = np.flatnonzero((rows["flags"] & FLAG_DEAD) == 0)
    if not len(live_pos):
        return
    count = min(len(live_pos), samples)
    picks = {int(live_pos[0]), int(live_pos[-1])}
    # the stdlib's sampler: numpy.random costs ~15 ms to import, on every store open
    picks.update(int(live_pos[i]) for i in random.sample(range(len(live_pos)), count))
    picks_list = sorted(picks)
    seqs = [int(rows["seq"][p]) for p in picks_list]
    raw = fetch_raw(seqs)
    assert f32 is not None
    for p, s in zip(picks_list, seqs, strict=True):
        if s not in raw:
            raise StaleMatrix(f"matrix row for chunk seq {s} has no SQLite row")
        expect = normalise(raw[s][None, :])[0]
        if not np.allclose(np.asarray(f32[p]), expect, atol=1e-5):
            raise StaleMatrix(f"{files.f32.name} row {p} differs from SQLite")
        q, _ = quantise(expect[None, :])
        if not np.array_equal(q[0], i8[p]):
            raise StaleMatrix(f"{files.i8.name} row {p} differs from SQLite")

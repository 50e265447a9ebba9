"""A base's vectors as one matrix: an int8 copy in RAM, float32 memory-mapped on disk.

Why this shape (see docs/store.md for the measurements):

* Exact search over 100k x 768 by scanning SQL rows costs hundreds of
  milliseconds; a float32 matrix product is memory-bound (~300 MB per query).
* An int8 copy (one scale per row) is a quarter of that memory. SimSIMD's int8
  dot kernels score every row in a few milliseconds; the best ``rescore``
  candidates are then re-scored exactly against the float32 rows, which live in
  a memory-mapped file, so only the touched pages are ever resident.
* The matrix is persisted next to the SQLite file so that opening a big base
  reads ~77 MB of int8 instead of decoding 100,000 BLOBs. SQLite stays the
  source of truth: the matrix header records the store's uuid and write
  generation and checksums; anything that does not match exactly is rebuilt.

Rows are append-only: a write appends the new rows and tombstones the old ones
(cheap, no rebuild); when tombstones pile up the matrix is compacted into fresh
files (renamed into place, so searches holding the old mapping stay valid).
Row order follows the chunk table's AUTOINCREMENT ``seq``, which is never
reused, so the row of a ``seq`` is found by binary search.

The file format is in ``matrix_files.py``, reading and checking persisted files in
``matrix_load.py``, the search math in ``vector_search.py``; this module keeps the
index in step with the store.

Not thread-safe on its own: the owning BaseStore serialises every mutation
under its lock and hands searches an immutable :class:`Snapshot`.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Iterable
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
    Tuning,
    as_bytes,
    crc,
    pwrite_all,
)
from .matrix_load import read_matrix, verify_sample
from .vector_search import Snapshot, map_rows, normalise, quantise

_STATE_FIELDS = (
    "_n",
    "_live",
    "_i8",
    "_scales",
    "_rows",
    "_dead",
    "_i8_crc",
    "_rows_crc",
    "_fds",
    "_map",
    "_mapped_rows",
    "generation",
)


class VectorIndex:
    """The in-memory int8 matrix plus its persisted files. See the module docstring."""

    def __init__(self, files: MatrixFiles, dims: int, store_uuid: str, tuning: Tuning):
        self.files = files
        self.dims = dims
        self.store_uuid = store_uuid
        self.tuning = tuning
        self.generation = -1
        self._n = 0
        self._live = 0
        self._i8 = np.empty((0, dims), np.int8)
        self._scales = np.empty(0, np.float32)
        self._rows = np.empty(0, ROW_DTYPE)
        self._dead = np.empty(0, np.int64)
        self._i8_crc = 0
        # crc of the row records, kept up to date on appends (an O(n) recount at every
        # commit made each write cost more the bigger the base); None = recount once
        self._rows_crc: int | None = 0
        self._fds: dict[str, int] = {}
        self._map: np.ndarray | None = None
        self._mapped_rows = 0
        self._read_only = False  # loaded by a reader: never written, fds opened O_RDONLY

    # ----------------------------------------------------------------- sizes

    @property
    def rows(self) -> int:
        """Matrix rows including tombstones."""
        return self._n

    @property
    def live(self) -> int:
        return self._live

    @property
    def dead(self) -> int:
        return self._n - self._live

    def resident_bytes(self) -> int:
        """Bytes this index holds in RAM (int8 rows, scales, row table; capacity included)."""
        return int(
            self._i8.nbytes
            + self._scales.nbytes
            + self._rows.nbytes
            + self._dead.nbytes
        )

    def live_seqs(self) -> np.ndarray:
        rows = self._rows[: self._n]
        live: np.ndarray = rows["seq"][(rows["flags"] & FLAG_DEAD) == 0].copy()
        return live

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def load(
        cls,
        files: MatrixFiles,
        expected: Expected,
        tuning: Tuning,
        fetch_raw: Callable[[list[int]], dict[int, np.ndarray]],
        *,
        read_only: bool = False,
    ) -> VectorIndex:
        """Open the persisted matrix, or raise StaleMatrix saying why it cannot be trusted.

        Checks: header magic/version/checksum, dimensions, store uuid and write
        generation against SQLite, live row count, file sizes, checksums of the
        row table and the int8 rows, and a sample of float32 rows against their
        SQLite BLOBs.

        `read_only` (a reader beside the process that writes these files): the
        files are opened read-only, and the float32 rows are mapped from the very
        file the header was read from, so a compaction that renames fresh files
        into place meanwhile cannot mix two versions (the checksums catch the
        int8 and row files).
        """
        try:
            fh = open(files.f32, "rb")  # noqa: SIM115 - kept open for the mapping below
        except FileNotFoundError as exc:
            raise StaleMatrix(f"{files.f32.name} is missing") from exc
        except OSError as exc:
            raise StaleMatrix(f"{files.f32.name} cannot be read: {exc}") from exc
        with fh:
            return cls._load_from(fh, files, expected, tuning, fetch_raw, read_only=read_only)

    @classmethod
    def _load_from(
        cls,
        f32_file: Any,
        files: MatrixFiles,
        expected: Expected,
        tuning: Tuning,
        fetch_raw: Callable[[list[int]], dict[int, np.ndarray]],
        *,
        read_only: bool,
    ) -> VectorIndex:
        loaded = read_matrix(f32_file, files, expected)
        n = loaded.n
        index = cls(files, expected.dims, expected.store_uuid, tuning)
        index._rows, index._i8, index._scales, index._dead = loaded.rows, loaded.i8, loaded.scales, loaded.dead
        index._n, index._live = n, loaded.live
        index._i8_crc = loaded.i8_crc
        index._rows_crc = loaded.rows_crc
        index.generation = loaded.generation
        index._read_only = read_only
        index._open_fds()
        if read_only and n:
            index._map = map_rows(files.f32, n, index.dims, opened=f32_file)
            index._mapped_rows = n
        verify_sample(files, index._rows[:n], index._i8[:n], index._f32_view(n), tuning.verify_samples, fetch_raw)
        return index

    @classmethod
    def build(
        cls,
        files: MatrixFiles,
        dims: int,
        store_uuid: str,
        generation: int,
        tuning: Tuning,
        batches: Iterable[tuple[np.ndarray, np.ndarray]],
    ) -> VectorIndex:
        """Write a fresh matrix from ``(seqs, raw float32 vectors)`` batches in seq order."""
        index = cls(files, dims, store_uuid, tuning)
        tmp = files.tmp()
        index._fds = tmp.create()
        try:
            last = None
            for seqs, vectors in batches:
                seqs = np.asarray(seqs, np.int64)
                if len(seqs) and last is not None and seqs[0] <= last:
                    raise ValueError("build batches must come in increasing seq order")
                if len(seqs):
                    last = int(seqs[-1])
                index._append_rows(seqs, normalise(vectors))
            index.generation = generation
            index._write_header()
        except BaseException:
            index._close_fds()
            tmp.discard()
            raise
        index._close_fds()
        tmp.replace(files)
        index._open_fds()
        return index

    def close(self) -> None:
        self._close_fds()
        self._map = None
        self._mapped_rows = 0

    # -------------------------------------------------------------- writes

    def append(self, seqs: np.ndarray, vectors: np.ndarray) -> None:
        """Append rows (seqs strictly above every existing one); files are written, header is not."""
        seqs = np.asarray(seqs, np.int64)
        if not len(seqs):
            return
        if self._n and seqs[0] <= self._rows["seq"][self._n - 1]:
            raise ValueError("appended seqs must be greater than the existing ones")
        self._append_rows(seqs, normalise(vectors))

    def remove(self, seqs: Iterable[int]) -> int:
        """Tombstone the rows of ``seqs``; unknown seqs are ignored. Returns rows removed."""
        targets = np.unique(np.fromiter(seqs, np.int64))
        if not len(targets) or not self._n:
            return 0
        all_seq = self._rows["seq"][: self._n]
        pos = np.searchsorted(all_seq, targets)
        pos = pos[pos < self._n]
        pos = pos[np.isin(all_seq[pos], targets)]
        flags = self._rows["flags"]
        pos = pos[(flags[pos] & FLAG_DEAD) == 0]
        if not len(pos):
            return 0
        flags[pos] |= FLAG_DEAD
        self._rows_crc = None  # flags changed in place: recounted at the next header write
        # One write covering the touched span (an item's rows are usually adjacent).
        lo, hi = int(pos.min()), int(pos.max()) + 1
        pwrite_all(
            self._fds["rows"],
            as_bytes(self._rows[lo:hi]),
            lo * ROW_DTYPE.itemsize,
        )
        self._dead = np.union1d(
            self._dead, pos.astype(np.int64)
        )  # a new array: snapshots keep theirs
        self._live -= len(pos)
        return len(pos)

    def commit(self, generation: int) -> None:
        """Record that the files now describe SQLite ``generation`` (compacting first if due)."""
        self.generation = generation
        if self.dead and (
            self._live == 0
            or (
                self.dead >= self.tuning.compact_min_dead
                and self.dead > self.tuning.compact_ratio * self._n
            )
        ):
            self.compact()
            return
        self._write_header()

    def compact(self) -> None:
        """Rewrite the matrix without tombstones into fresh files (renamed into place).

        Rows are copied as they are (no re-normalising or re-quantising), so this is
        a straight copy of the live rows. Searches holding the old snapshot keep
        reading the old (unlinked) float32 file through their mapping.
        """
        n = self._n
        keep = np.flatnonzero((self._rows["flags"][:n] & FLAG_DEAD) == 0)
        m = len(keep)
        f32 = self._f32_view(n)
        fresh = VectorIndex(self.files, self.dims, self.store_uuid, self.tuning)
        fresh._reserve(m + max(64, m // 8))
        fresh._i8[:m] = self._i8[keep]
        fresh._scales[:m] = self._scales[keep]
        fresh._rows[:m] = self._rows[keep]
        fresh._rows["flags"][:m] = 0
        fresh._n = fresh._live = m
        fresh._i8_crc = crc(fresh._i8[:m])
        fresh._rows_crc = None
        fresh.generation = self.generation
        tmp = self.files.tmp()
        fds = fresh._fds = tmp.create()
        try:
            step = 8192
            for start in range(0, m, step):
                part = np.ascontiguousarray(f32[keep[start : start + step]])  # type: ignore[index]
                pwrite_all(
                    fds["f32"],
                    as_bytes(part),
                    HEADER_SIZE + start * self.dims * 4,
                )
            pwrite_all(fds["i8"], as_bytes(fresh._i8[:m]), 0)
            pwrite_all(fds["rows"], as_bytes(fresh._rows[:m]), 0)
            fresh._write_header()
        except BaseException:
            fresh._close_fds()
            tmp.discard()
            raise
        fresh._close_fds()
        tmp.replace(self.files)
        fresh._open_fds()
        self._close_fds()
        for name in _STATE_FIELDS:
            setattr(self, name, getattr(fresh, name))
        fresh._fds = {}

    # -------------------------------------------------------------- search

    def snapshot(self) -> Snapshot:
        n = self._n
        return Snapshot(
            i8=self._i8[:n],
            scales=self._scales[:n],
            seq=self._rows["seq"][:n].copy(),
            dead=self._dead,
            live=self._live,
            f32=self._f32_view(n),
        )

    # ------------------------------------------------------------ internals

    def _append_rows(self, seqs: np.ndarray, unit: np.ndarray) -> None:
        m = len(seqs)
        if unit.shape != (m, self.dims):
            raise ValueError(f"expected ({m}, {self.dims}) vectors, got {unit.shape}")
        q, scales = quantise(unit)
        self._reserve(self._n + m)
        n = self._n
        unit = np.ascontiguousarray(unit, np.float32)
        rows = np.zeros(m, ROW_DTYPE)
        rows["seq"], rows["scale"] = seqs, scales
        # Files first (positions are derived from n), then memory.
        pwrite_all(
            self._fds["f32"],
            as_bytes(unit),
            HEADER_SIZE + n * self.dims * 4,
        )
        pwrite_all(self._fds["i8"], as_bytes(q), n * self.dims)
        pwrite_all(self._fds["rows"], as_bytes(rows), n * ROW_DTYPE.itemsize)
        self._i8[n : n + m] = q
        self._scales[n : n + m] = scales
        self._rows[n : n + m] = rows
        self._i8_crc = crc(q, self._i8_crc)
        if self._rows_crc is not None:
            self._rows_crc = crc(rows, self._rows_crc)
        self._n += m
        self._live += m

    def _reserve(self, needed: int) -> None:
        capacity = len(self._rows)
        if needed <= capacity:
            return
        new_cap = max(needed, int(capacity * 1.25) + 64)
        i8 = np.empty((new_cap, self.dims), np.int8)
        scales = np.zeros(new_cap, np.float32)
        rows = np.zeros(new_cap, ROW_DTYPE)
        n = self._n
        i8[:n], scales[:n], rows[:n] = self._i8[:n], self._scales[:n], self._rows[:n]
        self._i8, self._scales, self._rows = i8, scales, rows

    def _write_header(self) -> None:
        if self._rows_crc is None:
            self._rows_crc = crc(self._rows[: self._n])
        body = _HEADER.pack(
            MAGIC,
            FORMAT_VERSION,
            self.dims,
            self._n,
            self._live,
            self.generation,
            self.store_uuid.encode("ascii")[:32].ljust(32, b"\0"),
            self._i8_crc,
            self._rows_crc,
        )
        pwrite_all(self._fds["f32"], body + struct.pack("<I", zlib.crc32(body)), 0)

    def _f32_view(self, n: int) -> np.ndarray | None:
        if n == 0:
            return None
        if self._map is None or self._mapped_rows < n:
            self._map = map_rows(self.files.f32, n, self.dims)
            self._mapped_rows = n
        return self._map[:n]

    def _open_fds(self) -> None:
        self._close_fds()
        flags = os.O_RDONLY if self._read_only else os.O_RDWR
        self._fds = {
            k: os.open(p, flags)
            for k, p in zip(("f32", "i8", "rows"), self.files.all(), strict=True)
        }
        self._map = None
        self._mapped_rows = 0

    def _close_fds(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = {}

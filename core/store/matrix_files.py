"""The persisted matrix's file format: three files, a checksummed header, what must match.

A matrix lives next to ``<base>.sqlite`` as ``.vectors.f32`` (a 4 KiB header, then
the normalised float32 rows), ``.vectors.i8`` (the int8 rows) and ``.vectors.rows``
(per row: seq, scale, flags). The header names the store's uuid and write
generation and the other files' checksums; `Expected` is what SQLite says they must
describe, and anything that does not match raises `StaleMatrix` (the matrix is then
rebuilt from the BLOBs). `Tuning` holds the measured search and upkeep knobs.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HEADER_SIZE = 4096
MAGIC = b"KTUIVEC1"
FORMAT_VERSION = 1
# magic, version, dims, rows, live, generation, store uuid, i8 crc, rows crc
_HEADER = struct.Struct("<8sIIQQq32sII")
ROW_DTYPE = np.dtype([("seq", "<i8"), ("scale", "<f4"), ("flags", "<u4")])
FLAG_DEAD = 1


class StaleMatrix(Exception):
    """The persisted matrix cannot be trusted; ``str(exc)`` says why."""


@dataclass(frozen=True, slots=True)
class Tuning:
    """Search and maintenance knobs (defaults measured at 100k x 768 on 2 cores)."""

    rescore: int = 128  # float32 re-scoring candidates (at least 4*k are used)
    exact_below: int = 4096  # below this many rows, score float32 directly
    compact_min_dead: int = 1024  # compact when this many tombstones ...
    compact_ratio: float = 0.25  # ... and they exceed this share of the rows
    # SimSIMD threads per query. One: on a busy machine (a laptop that is indexing) its
    # OpenMP threads spin-wait for a core and a query took 24 ms instead of ~1 ms at
    # 10k rows; two threads were never faster on 2 cores (tests/benchmarks/test_bench_search_busy.py).
    threads: int = 1
    verify_samples: int = 8  # rows checked against SQLite when loading


@dataclass(frozen=True, slots=True)
class MatrixFiles:
    """The three files of a persisted matrix, next to ``<base>.sqlite``."""

    f32: Path  # header + normalised float32 rows (memory-mapped)
    i8: Path  # int8 rows
    rows: Path  # per row: seq, scale, flags

    @classmethod
    def next_to(cls, sqlite_path: Path) -> MatrixFiles:
        stem = sqlite_path.with_suffix("")
        return cls(
            f32=stem.with_name(stem.name + ".vectors.f32"),
            i8=stem.with_name(stem.name + ".vectors.i8"),
            rows=stem.with_name(stem.name + ".vectors.rows"),
        )

    def all(self) -> list[Path]:
        return [self.f32, self.i8, self.rows]

    def tmp(self) -> MatrixFiles:
        return MatrixFiles(*(p.with_name(p.name + ".tmp") for p in self.all()))

    def create(self) -> dict[str, int]:
        """Create the three files empty (the f32 file holding room for the header), open for
        writing: a fresh matrix is written here and then renamed into place (`replace`)."""
        for p in self.all():
            p.unlink(missing_ok=True)
        fds = {k: os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
               for k, p in zip(("f32", "i8", "rows"), self.all(), strict=True)}
        try:
            os.ftruncate(fds["f32"], HEADER_SIZE)
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            self.discard()
            raise
        return fds

    def discard(self) -> None:
        for p in self.all():
            p.unlink(missing_ok=True)

    def replace(self, target: MatrixFiles) -> None:
        """Rename these files over `target`'s. The header sits in the f32 file: it is renamed
        last, so a crash in between leaves the old header (a stale generation) or
        mismatching checksums, never a matrix that looks valid and is not."""
        os.replace(self.i8, target.i8)
        os.replace(self.rows, target.rows)
        os.replace(self.f32, target.f32)


@dataclass(frozen=True, slots=True)
class Expected:
    """What SQLite says the matrix must describe."""

    dims: int
    generation: int
    store_uuid: str
    live: int


def as_bytes(data: np.ndarray | bytes | memoryview) -> memoryview:
    """A flat byte view (no copy for contiguous arrays; fine for empty ones)."""
    if isinstance(data, np.ndarray):
        return memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))  # type: ignore[arg-type]
    return memoryview(data).cast("B")


def crc(buf: np.ndarray | bytes, start: int = 0) -> int:
    return zlib.crc32(as_bytes(buf), start)


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = as_bytes(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written

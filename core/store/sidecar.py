"""The vector matrix beside a base store: loading, rebuilding and keeping it in step.

SQLite holds every vector as a BLOB; the matrix (:mod:`ktui.core.store.matrix`) is
derived data: loaded lazily from its files when they match the store's write
generation, rebuilt from the BLOBs when they do not, updated after each committed
write and dropped (to be rebuilt) when an update fails. A reader builds a private
copy in a temporary folder rather than write next to the store.

A full disk while the matrix files are written is not swallowed: it raises
DiskFullError like a full disk under SQLite, so the runtime pauses its queue
instead of going on writing rows whose matrix cannot follow. The rows of that
write are committed; the dropped matrix is rebuilt from them at its next use.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ktui.core.errors import DiskFullError, StoreError
from ktui.core.storage_faults import storage_error

from .connection import StoreConnection
from .matrix import VectorIndex
from .matrix_files import Expected, MatrixFiles, StaleMatrix
from .rows import batches

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MatrixInfo:
    """How the vector matrix was obtained and what it holds (for tests, benchmarks, diagnostics)."""

    loaded: bool
    source: (
        str | None
    )  # "file" (persisted matrix reused) | "rebuilt" (from the BLOBs) | None
    reason: str | None  # why it was rebuilt
    rows: int  # matrix rows including tombstones
    live: int
    resident_bytes: int  # RAM held by the int8 copy, scales and row table
    float32_bytes: int  # live * dimensions * 4, what a plain float32 matrix would hold



class MatrixSidecar(StoreConnection):
    """The matrix upkeep of a base store (see the module docstring)."""

    def matrix_info(self) -> MatrixInfo:
        with self._lock:
            idx = self._index
            return MatrixInfo(
                loaded=idx is not None,
                source=self._matrix_source,
                reason=self._matrix_reason,
                rows=idx.rows if idx else 0,
                live=idx.live if idx else 0,
                resident_bytes=idx.resident_bytes() if idx else 0,
                float32_bytes=(idx.live if idx else 0) * self.dimensions * 4,
            )

    def load_matrix(self) -> MatrixInfo:
        """Load (or rebuild) the matrix now instead of on the first search."""
        with self._lock, self._sql("load vectors"):
            self._ensure_index()
        return self.matrix_info()

    def _ensure_index(self) -> VectorIndex:
        """The loaded matrix; loads the persisted one or rebuilds it from the BLOBs. Lock held."""
        if self.read_only:
            return self._ensure_reader_index()
        if self._index is not None:
            return self._index
        expected = Expected(
            dims=self.dimensions,
            generation=self._generation(),
            store_uuid=self._uuid,
            live=int(self._con.execute("SELECT count(*) FROM chunk").fetchone()[0]),
        )
        try:
            self._index = VectorIndex.load(
                self.files, expected, self.tuning, self._fetch_raw
            )
            self._matrix_source, self._matrix_reason = "file", None
        except PermissionError as exc:
            raise StoreError(
                f"Vector store {self.path}: cannot open its matrix files: {exc}"
            ) from exc
        except StaleMatrix as exc:
            log.info("rebuilding vector matrix of %s: %s", self.path.name, exc)
            self._index = self._rebuild(self.files, expected.generation, str(exc), "cannot write its matrix files")
        return self._index

    def _ensure_reader_index(self) -> VectorIndex:
        """A reader's matrix, as of the store's latest committed write generation.

        One read transaction pins the snapshot: the generation, the live count,
        the sample rows checked against the persisted files and (when those files
        belong to another generation, because the writer is between its SQLite
        commit and its matrix update, or compacting) the BLOBs a private matrix
        is built from. A matrix of an older generation is dropped and loaded again.
        """
        generation = self._generation()
        if self._index is not None and self._index.generation == generation:
            return self._index
        if self._index is not None:
            self._index.close()
            self._index = None
        self._con.execute("BEGIN")
        try:
            expected = Expected(
                dims=self.dimensions,
                generation=self._generation(),
                store_uuid=self._uuid,
                live=int(self._con.execute("SELECT count(*) FROM chunk").fetchone()[0]),
            )
            try:
                self._index = VectorIndex.load(
                    self.files, expected, self.tuning, self._fetch_raw, read_only=True
                )
                self._matrix_source, self._matrix_reason = "file", None
            except (StaleMatrix, OSError) as exc:
                if self._scratch is None:
                    self._scratch = tempfile.TemporaryDirectory(prefix="ktui-reader-")
                files = MatrixFiles.next_to(Path(self._scratch.name) / self.path.name)
                self._index = self._rebuild(files, expected.generation, str(exc), "cannot build a reader's matrix")
        finally:
            self._con.execute("COMMIT")
        return self._index

    def _rebuild(self, files: MatrixFiles, generation: int, reason: str, failure: str) -> VectorIndex:
        """A matrix built into `files` from the store's BLOBs (the persisted one could not be
        used, for `reason`); an OSError becomes a StoreError saying `failure`."""
        try:
            index = VectorIndex.build(files, self.dimensions, self._uuid, generation, self.tuning,
                                      self._iter_blobs())
        except OSError as exc:
            if isinstance(fault := storage_error(exc, files.f32), DiskFullError):
                raise fault from exc
            raise StoreError(f"Vector store {self.path}: {failure}: {exc}") from exc
        self._matrix_source, self._matrix_reason = "rebuilt", reason
        return index

    def _apply(
        self,
        index_: VectorIndex,
        removed: Sequence[int],
        added: np.ndarray,
        vectors: np.ndarray,
        generation: int,
    ) -> None:
        """Bring the matrix in step with a committed write; on failure drop it so the next use
        rebuilds. A full disk raises DiskFullError (after dropping it): see the module docstring."""
        try:
            index_.remove(removed)
            index_.append(added, vectors)
            index_.commit(generation)
        except Exception as exc:  # noqa: BLE001 - rows are committed; derived data must not fail the write
            log.warning(
                "vector matrix of %s dropped after a failed update: %s",
                self.path.name,
                exc,
            )
            index_.close()
            self._index = None
            self._matrix_source, self._matrix_reason = None, f"update failed: {exc}"
            if isinstance(fault := storage_error(exc, index_.files.f32), DiskFullError):
                raise fault from exc

    def _apply_removal(self, index_: VectorIndex, removed: Sequence[int], generation: int) -> None:
        """`_apply` for a write that only deleted rows."""
        self._apply(index_, removed, np.empty(0, np.int64), np.empty((0, self.dimensions), np.float32), generation)

    def _iter_blobs(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        cur = self._con.execute("SELECT seq, id, vector FROM chunk ORDER BY seq")
        width = self.dimensions * 4
        while rows := cur.fetchmany(4096):
            for _seq, cid, blob in rows:
                if not isinstance(blob, bytes) or len(blob) != width:
                    raise StoreError(
                        f"Vector store file {self.path}: chunk {cid} has a vector of "
                        f"{len(blob) if isinstance(blob, bytes) else 0} bytes, expected {width}"
                    )
            seqs = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            vecs = np.frombuffer(
                b"".join(r[2] for r in rows), dtype=np.float32
            ).reshape(len(rows), self.dimensions)
            yield seqs, vecs

    def _fetch_raw(self, seqs: list[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        width = self.dimensions * 4
        for part in batches(seqs):
            marks = ",".join("?" * len(part))
            for seq, blob in self._con.execute(
                f"SELECT seq, vector FROM chunk WHERE seq IN ({marks})", part
            ):
                if isinstance(blob, bytes) and len(blob) == width:
                    out[seq] = np.frombuffer(blob, dtype=np.float32)
        return out

    def _ids_for_seqs(self, seqs: list[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        with self._lock, self._sql("resolve chunk ids"):
            for part in batches(seqs):
                marks = ",".join("?" * len(part))
                out.update(
                    self._con.execute(
                        f"SELECT seq, id FROM chunk WHERE seq IN ({marks})", part
                    ).fetchall()
                )
        return out


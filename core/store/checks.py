"""Health checks of a base store, for `ktui doctor`, the invariant tests and repair.

`integrity_check` is SQLite's own; `check_invariants` states the store's promises
(FTS in step with the rows, one row per chunk index, every BLOB of the base's width,
the matrix in step with the rows) and reports each one broken in words.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from ktui.core.errors import StoreError
from ktui.core.search.keyword import has_terms

from .matrix import VectorIndex
from .sidecar import MatrixSidecar
from .vector_search import normalise, quantise


class StoreChecks(MatrixSidecar):
    """Integrity and invariant checks (see the module docstring)."""

    def integrity_check(self) -> list[str]:
        """SQLite's own `PRAGMA integrity_check` of the file: [] when it says "ok"."""
        with self._lock:
            self._check_open()
            try:
                rows = [str(r[0]) for r in self._con.execute("PRAGMA integrity_check(20)")]
            except sqlite3.DatabaseError as exc:
                return [f"integrity check failed: {exc}"]
        return [] if rows == ["ok"] else rows

    def check_invariants(self) -> list[str]:
        """Human-readable violations of the store's invariants (empty when healthy).

        Checks: FTS index internally consistent and in step with the chunk rows
        (no FTS document without its chunk, no indexable chunk missing), no
        (item_id, chunk_index) twice, every BLOB of the base's width, and the
        matrix in step with the rows (same live chunks, same generation, every
        float32/int8 row equal to its normalised/quantised BLOB).
        """
        problems: list[str] = []
        with self._lock, self._sql("check invariants"):
            con = self._con
            try:
                con.execute(
                    "INSERT INTO chunk_fts(chunk_fts) VALUES ('integrity-check')"
                )
            except sqlite3.DatabaseError as exc:
                problems.append(f"FTS index fails its integrity check: {exc}")
            con.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_fts_docs USING fts5vocab(main, chunk_fts, instance)"
            )
            fts_docs = {
                r[0]
                for r in con.execute("SELECT DISTINCT doc FROM temp.chunk_fts_docs")
            }
            chunk_rows = {
                seq: (cid, text)
                for seq, cid, text in con.execute("SELECT seq, id, text FROM chunk")
            }
            for doc in sorted(fts_docs - chunk_rows.keys()):
                problems.append(f"FTS row {doc} has no chunk")
            for seq in sorted(chunk_rows.keys() - fts_docs):
                cid, text = chunk_rows[seq]
                if has_terms(text):
                    problems.append(f"chunk {cid} is missing from the FTS index")
            for item_id, chunk_index, n in con.execute(
                "SELECT item_id, chunk_index, count(*) FROM chunk GROUP BY item_id, chunk_index HAVING count(*) > 1"
            ):
                problems.append(
                    f"chunk {chunk_index} of item {item_id} is stored {n} times"
                )
            for (cid,) in con.execute(
                "SELECT id FROM chunk WHERE length(vector) != ?", (self.dimensions * 4,)
            ):
                problems.append(
                    f"chunk {cid} has a vector that is not {self.dimensions} float32 values"
                )
            try:
                index_ = self._ensure_index()
            except StoreError as exc:
                problems.append(f"matrix cannot be built: {exc}")
                return problems
            generation = self._generation()
            if index_.generation != generation:
                problems.append(
                    f"matrix generation {index_.generation} != store generation {generation}"
                )
            live = set(index_.live_seqs().tolist())
            if live != chunk_rows.keys():
                extra, missing = (
                    len(live - chunk_rows.keys()),
                    len(chunk_rows.keys() - live),
                )
                problems.append(
                    f"matrix out of step with rows: {extra} rows without chunk, {missing} chunks without row"
                )
            problems += self._check_matrix_rows(index_)
        return problems

    def _check_matrix_rows(self, index_: VectorIndex) -> list[str]:
        problems: list[str] = []
        snap = index_.snapshot()
        if snap.f32 is None:
            return problems
        alive = np.ones(len(snap.seq), bool)
        alive[snap.dead] = False
        positions = np.flatnonzero(alive)
        if len(positions) > 20000:  # keep the check affordable on big bases
            positions = np.random.default_rng(0).choice(positions, 20000, replace=False)
        raw = self._fetch_raw(snap.seq[positions].tolist())
        for p in positions.tolist():
            seq = int(snap.seq[p])
            if seq not in raw:
                continue  # reported as out of step above
            expect = normalise(raw[seq][None, :])
            if not np.allclose(np.asarray(snap.f32[p]), expect[0], atol=1e-5):
                problems.append(
                    f"matrix float32 row of chunk seq {seq} differs from its BLOB"
                )
            elif not np.array_equal(quantise(expect)[0][0], snap.i8[p]):
                problems.append(
                    f"matrix int8 row of chunk seq {seq} differs from its BLOB"
                )
        return problems


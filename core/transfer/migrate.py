"""Moving a whole data directory between backends (`ktui migrate`, docs/postgres.md).

Everything is copied as stored, nothing is embedded again: the groups, every base with
every setting (ids kept), every item of every level with its status, phase, error and
data, the import ledger's rows, and each base's chunks with their ids and vectors
(`ChunkStore.read_rows` / `write_rows`). Both sides are reached through the same
protocols the service uses (`Catalogue`, `Stores`), so SQLite -> PostgreSQL and
PostgreSQL -> SQLite are the same code.

Order per base, so that no half base is ever visible in the target's catalogue: the
chunks first (into a store no catalogue row names yet), then the base's row and all its
items in ONE catalogue transaction, then the counts are checked (items, chunks,
vectors) against the source's. Memory stays bounded: chunks move in batches of
`batch` rows (two batches in memory), items in pages of `batch` rows.

An interrupted migration leaves the source untouched (it is only read) and the target
holding the bases finished before, each complete, plus at most one store that no
catalogue row names (the base that was being copied). `merge=True` (`--merge`) resumes:
a base already in the target with the source's counts is kept as it is, such a stray
store is dropped and its base copied again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ktui.core.catalogue import AsyncConn, Catalogue
from ktui.core.errors import InvalidOperationError
from ktui.core.store.protocol import ChunkStore, Stores

_BASE_COLUMNS = ("id", "name", "group_id", "emoji", "dimensions", "embedding_model_id", "status", "error",
                 "rerank_model_id", "chunk_size", "chunk_overlap", "threshold", "document_count", "search_mode",
                 "hybrid_alpha", "created_at", "updated_at", "ocr_enabled", "ocr_languages", "ocr_max_pages")
_ITEM_COLUMNS = ("id", "base_id", "group_id", "type", "data", "status", "phase", "error", "created_at", "updated_at")
_CONTAINERS = ("directory", "sitemap")


@dataclass(slots=True)
class BaseMigration:
    """One base: what the source holds and what the target was found to hold afterwards."""

    id: str
    name: str
    status: str = "pending"  # moved | kept (already in the target, same counts) | error
    items: int = 0
    chunks: int = 0
    vectors: int = 0
    target_items: int = 0
    target_chunks: int = 0
    target_vectors: int = 0
    reason: str | None = None

    @property
    def verified(self) -> bool:
        return (self.status in ("moved", "kept") and (self.items, self.chunks, self.vectors)
                == (self.target_items, self.target_chunks, self.target_vectors))


@dataclass(slots=True)
class MigrationReport:
    source: str  # named without credentials
    target: str
    groups: int = 0
    bases: list[BaseMigration] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)  # stores of an interrupted run that were dropped
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(b.verified for b in self.bases)

    @property
    def chunks(self) -> int:
        return sum(b.chunks for b in self.bases if b.status == "moved")

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "target": self.target, "ok": self.ok, "groups": self.groups,
            "bases": [{**asdict(b), "verified": b.verified} for b in self.bases],
            "cleaned": list(self.cleaned), "seconds": round(self.seconds, 3),
        }


Progress = Callable[[str, int, int], None]  # (base name, chunks copied, chunks in the base)


class Migrator:
    """Copy every base of `source` into `target` (see the module docstring)."""

    def __init__(self, source: Catalogue, source_stores: Stores, target: Catalogue, target_stores: Stores, *,
                 source_where: str, target_where: str, merge: bool = False, batch: int = 1000,
                 progress: Progress | None = None, clock: Callable[[], float] = time.perf_counter):
        self.source, self.source_stores = source, source_stores
        self.target, self.target_stores = target, target_stores
        self.merge = merge
        self.batch = max(1, int(batch))
        self.progress = progress
        self.clock = clock
        self.report = MigrationReport(source_where, target_where)
        self._bool_ocr = target.dialect.name == "postgresql"

    async def run(self) -> MigrationReport:
        started = self.clock()
        bases = [dict(zip(_BASE_COLUMNS, row, strict=True)) for row in await self.source.fetchall(
            f"SELECT {', '.join(_BASE_COLUMNS)} FROM knowledge_base ORDER BY created_at, id")]
        ledger = {r[0]: (r[1], r[2], r[3]) for r in await self.source.fetchall(
            "SELECT base_id, fingerprint, state, created_at FROM base_import")}
        there = {r[0]: r[1] for r in await self.target.fetchall("SELECT id, name FROM knowledge_base")}
        plan = await self._preflight(bases, there, ledger)
        groups = await self._groups()
        for base, kept in plan:
            entry = BaseMigration(base["id"], base["name"])
            self.report.bases.append(entry)
            await self._count_source(base, entry)
            if kept:
                entry.status = "kept"
            else:
                base["group_id"] = groups.get(base["group_id"]) if base["group_id"] else None
                await self._move(base, ledger.get(base["id"]), entry)
            await self._count_target(base, entry)
            if not entry.verified and entry.status != "error":
                entry.status, entry.reason = "error", "the counts in the target differ from the source's"
        self.report.seconds = self.clock() - started
        return self.report

    # --- before anything is written ------------------------------------------

    async def _preflight(self, bases: list[dict[str, Any]], there: dict[str, str],
                         ledger: dict[str, tuple[str, str, str]]) -> list[tuple[dict[str, Any], bool]]:
        """What to copy (False) and what is already there (True); refuses before any write."""
        if there and not self.merge:
            names = ", ".join(sorted(there.values())[:5]) + (", ..." if len(there) > 5 else "")
            raise InvalidOperationError(
                f"The target {self.report.target} already holds {len(there)} base(s) ({names}); nothing was "
                "copied. Migrate into an empty target, or pass --merge to add the bases beside them "
                "(that also resumes an interrupted migrate: bases already there are checked and kept)")
        taken = {name.casefold(): base_id for base_id, name in there.items()}
        plan: list[tuple[dict[str, Any], bool]] = []
        for base in bases:
            state = ledger.get(base["id"], (None, "done", None))[1]
            if state != "done":  # an import killed midway: the source's next open discards it
                continue
            if base["id"] in there:
                plan.append((base, True))
                continue
            other = taken.get(str(base["name"]).casefold())
            if other is not None:
                raise InvalidOperationError(
                    f"The target {self.report.target} already has a base named '{base['name']}' ({other}); "
                    "rename one of them first; nothing was copied")
            if base["dimensions"] is not None and self.source_stores.exists(base["id"]):
                self.source_stores.get(base["id"], int(base["dimensions"]))  # a damaged store refuses here
            plan.append((base, False))
        return plan

    async def _groups(self) -> dict[str, str]:
        """Source group id -> target group id; groups the target lacks are created (ids kept,
        or, with --merge, a target group of the same name is used)."""
        rows = await self.source.fetchall("SELECT id, name, created_at, updated_at FROM knowledge_group")
        existing = await self.target.fetchall("SELECT id, name FROM knowledge_group")
        by_id = {r[0] for r in existing}
        by_name = {str(r[1]).casefold(): r[0] for r in existing}
        mapping: dict[str, str] = {}
        new: list[tuple[Any, ...]] = []
        for gid, name, created, updated in rows:
            if gid in by_id:
                mapping[gid] = gid
            elif str(name).casefold() in by_name:
                mapping[gid] = by_name[str(name).casefold()]
            else:
                mapping[gid] = gid
                new.append((gid, name, created, updated))
        if new:
            async with self.target.transaction() as conn:
                await conn.executemany(
                    "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)", new)
        self.report.groups = len(new)
        return mapping

    # --- one base ---------------------------------------------------------------

    async def _move(self, base: dict[str, Any], ledger: tuple[str, str, str] | None, entry: BaseMigration) -> None:
        base_id = base["id"]
        if self.target_stores.exists(base_id):  # a store no catalogue row names: left by an interrupted run
            self.target_stores.destroy(base_id)
            self.report.cleaned.append(base_id)
        try:
            if base["dimensions"] is not None and self.source_stores.exists(base_id):
                dims = int(base["dimensions"])
                await self._copy_chunks(self.source_stores.get(base_id, dims),
                                        self.target_stores.create(base_id, dims), base["name"], entry.chunks)
            async with self.target.transaction() as conn:
                values = dict(base)
                if values["ocr_enabled"] is not None:
                    values["ocr_enabled"] = bool(values["ocr_enabled"]) if self._bool_ocr else int(values["ocr_enabled"])
                await conn.execute(
                    f"INSERT INTO knowledge_base ({', '.join(_BASE_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(_BASE_COLUMNS))})", [values[c] for c in _BASE_COLUMNS])
                await self._copy_items(conn, base_id)
                if ledger is not None:
                    await conn.execute(
                        "INSERT INTO base_import (base_id, fingerprint, state, created_at) VALUES (?, ?, ?, ?)",
                        [base_id, ledger[0], ledger[1], ledger[2]])
        except BaseException:
            if self.target_stores.exists(base_id):
                self.target_stores.destroy(base_id)  # the catalogue transaction rolled back: no trace is left
            raise
        entry.status = "moved"

    async def _copy_chunks(self, source: ChunkStore, target: ChunkStore, name: str, total: int) -> None:
        """Every chunk row in insertion order, `batch` at a time; the last write settles the
        target (PostgreSQL builds its HNSW index once, over every row)."""
        import asyncio

        done = 0
        if self.progress is not None:
            self.progress(name, 0, total)
        rows = await asyncio.to_thread(source.read_rows, 0, self.batch)
        while len(rows):
            following = await asyncio.to_thread(source.read_rows, rows.seqs[-1], self.batch)
            await asyncio.to_thread(target.write_rows, rows, settle=not len(following))
            done += len(rows)
            if self.progress is not None:
                self.progress(name, done, total)
            rows = following

    async def _copy_items(self, conn: AsyncConn, base_id: str) -> None:
        """The base's items by insertion order, a page at a time; an item whose container is
        not in yet (possible after a VACUUM renumbered the source's rowids) waits for it."""
        containers: set[str] = set()
        waiting: list[tuple[Any, ...]] = []
        after = -1
        insert = (f"INSERT INTO knowledge_item ({', '.join(_ITEM_COLUMNS)}) "
                  f"VALUES ({', '.join('?' * len(_ITEM_COLUMNS))})")
        while True:
            page = await self.source.fetchall(
                f"SELECT rowid, {', '.join(_ITEM_COLUMNS)} FROM knowledge_item WHERE base_id = ? AND rowid > ? "
                "ORDER BY rowid LIMIT ?", [base_id, after, self.batch])
            if not page:
                break
            after = int(page[-1][0])
            ready, waiting = containers_first([tuple(r[1:]) for r in page] + waiting, containers)
            if ready:
                await conn.executemany(insert, ready)
        if waiting:
            raise InvalidOperationError(
                f"{len(waiting)} item(s) of base {base_id} belong to a folder that is not in the source "
                "(run `ktui doctor` on the source); nothing of this base was copied")

    async def _count_source(self, base: dict[str, Any], entry: BaseMigration) -> None:
        entry.items = await _count_items(self.source, base["id"])
        entry.chunks, entry.vectors = await _count_chunks(self.source_stores, base)

    async def _count_target(self, base: dict[str, Any], entry: BaseMigration) -> None:
        entry.target_items = await _count_items(self.target, base["id"])
        entry.target_chunks, entry.target_vectors = await _count_chunks(self.target_stores, base)


def containers_first(rows: Sequence[tuple[Any, ...]], containers: set[str]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Split item rows into those insertable now (in an order that puts containers before
    their children) and those whose container is not in yet; `containers` grows."""
    ready: list[tuple[Any, ...]] = []
    pending = list(rows)
    progressed = True
    while pending and progressed:
        progressed = False
        later: list[tuple[Any, ...]] = []
        for row in pending:
            item_id, group_id, kind = row[0], row[2], row[3]
            if group_id is None or group_id in containers:
                ready.append(row)
                if kind in _CONTAINERS:
                    containers.add(item_id)
                progressed = True
            else:
                later.append(row)
        pending = later
    return ready, pending


async def _count_items(db: Catalogue, base_id: str) -> int:
    row = await db.fetchone("SELECT count(*) FROM knowledge_item WHERE base_id = ?", [base_id])
    return int(row[0]) if row else 0


async def _count_chunks(stores: Stores, base: dict[str, Any]) -> tuple[int, int]:
    import asyncio

    if base["dimensions"] is None or not stores.exists(base["id"]):
        return 0, 0
    store = stores.get(base["id"], int(base["dimensions"]))
    return await asyncio.to_thread(store.count), await asyncio.to_thread(store.count_vectors)

"""KnowledgeItemService: SQLite CRUD for items, status rules and container reconciliation.

A container's (directory / sitemap) status is never written by hand once it has
children: after every child status change or delete, `_reconcile_up` recomputes
the parent from its own phase and its immediate children and walks upward,
stopping as soon as an ancestor is unchanged. Every mutating call returns the
items whose state changed (the item itself and any reconciled ancestors) so the
runtime can publish exactly those as events.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ktui.core.data.rows import BASE_COLUMNS, ITEM_COLUMNS, base_from_row, data_to_json, item_from_row
from ktui.core.data.validation import (
    ValidItem,
    require_group_filter,
    require_id,
    require_ids,
    require_item_type,
    require_page,
    require_phase,
    require_status,
)
from ktui.core.db import Database, new_id, utc_now
from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import (
    ANY_GROUP,
    CONTAINER_TYPES,
    ITEM_DATA_CLASSES,
    ItemData,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
    Page,
)
from ktui.core.sqlite_thread import AsyncConnection

CHILD_FAILED_MESSAGE = "One or more child items failed"
_SQL_VARS = 500  # ids per IN (...) list, well under SQLite's variable limit


def check_state(item_type: ItemType, status: ItemStatus, phase: ItemPhase | None, error: str | None) -> None:
    """The status/phase/error combinations of the data model, with a clear message."""
    if status in (ItemStatus.IDLE, ItemStatus.COMPLETED):
        if phase is not None:
            raise ValidationError.field("phase", f"must be empty when status is {status}")
        if error is not None:
            raise ValidationError.field("error", f"must be empty when status is {status}")
    elif status == ItemStatus.PROCESSING:
        if error is not None:
            raise ValidationError.field("error", "must be empty while processing")
    elif status == ItemStatus.FAILED:
        if phase is not None:
            raise ValidationError.field("phase", "must be empty when status is failed")
        if not isinstance(error, str) or not error.strip():
            raise ValidationError.field("error", "a failed item needs a non-empty error message")
    if phase is not None:
        if phase == ItemPhase.PREPARING and item_type not in CONTAINER_TYPES:
            raise ValidationError.field("phase", "'preparing' applies to directory and sitemap items only")
        if phase in (ItemPhase.READING, ItemPhase.EMBEDDING) and item_type in CONTAINER_TYPES:
            raise ValidationError.field("phase", f"'{phase}' applies to file, url and note items only")


@dataclass
class ChildSpec:
    """A child to create under a container; directories may carry their own children."""

    type: ItemType
    data: ItemData
    children: list[ChildSpec] = field(default_factory=list)


def _chunks(values: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(values), _SQL_VARS):
        yield values[i : i + _SQL_VARS]


def _marks(n: int) -> str:
    return ",".join("?" * n)


class KnowledgeItemService:
    def __init__(self, db: Database):
        self._db = db

    # --- creation ---------------------------------------------------------

    async def create_roots(
        self, base_id: str, items: Sequence[ValidItem], *, status: ItemStatus = ItemStatus.PROCESSING
    ) -> list[KnowledgeItem]:
        """Insert root items in one transaction (all or none).

        Runtime-added items start `processing` with no phase (queued); imported
        items of a failed base start `idle`.
        """
        async with self._db.transaction() as conn:
            await self._require_base(conn, base_id)
            now = utc_now()
            rows = [
                (new_id(), base_id, None, v.type.value, data_to_json(v.data), status.value, None, None, now, now)
                for v in items
            ]
            await conn.executemany(
                f"INSERT INTO knowledge_item ({ITEM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            return await self._get_many(conn, [r[0] for r in rows])

    async def create_children(
        self, base_id: str, parent_id: str, children: Sequence[ChildSpec]
    ) -> list[KnowledgeItem]:
        """Insert a container's expansion (nested directories included) in one transaction.

        Leaves start `processing` (queued), nested containers `processing` too
        (they complete by reconciliation once their leaves do). Returns the
        created items, parents before children.
        """
        async with self._db.transaction() as conn:
            parent = await self._get(conn, parent_id)
            if parent.base_id != base_id:
                raise ValidationError.field("parent_id", "belongs to another knowledge base")
            if parent.type not in CONTAINER_TYPES:
                raise ValidationError.field("parent_id", "group owner must be a directory or sitemap item")
            now = utc_now()
            rows: list[tuple[Any, ...]] = []

            def walk(owner: str, specs: Sequence[ChildSpec]) -> None:
                for spec in specs:
                    ident = new_id()
                    rows.append((ident, base_id, owner, spec.type.value, data_to_json(spec.data),
                                 ItemStatus.PROCESSING.value, None, None, now, now))
                    if spec.children:
                        walk(ident, spec.children)

            walk(parent_id, children)
            await conn.executemany(
                f"INSERT INTO knowledge_item ({ITEM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            return await self._get_many(conn, [r[0] for r in rows])

    # --- reads ------------------------------------------------------------

    async def get(self, item_id: Any) -> KnowledgeItem:
        item_id = require_id(item_id, "item_id")
        async with self._db.read() as conn:
            return await self._get(conn, item_id)

    async def get_with_base(self, item_id: str) -> tuple[KnowledgeItem, KnowledgeBase]:
        """An item and its base in one read (what a runtime task starts from)."""
        item_cols = ", ".join(f"i.{c.strip()} AS i_{c.strip()}" for c in ITEM_COLUMNS.split(","))
        base_cols = ", ".join(f"b.{c.strip()} AS b_{c.strip()}" for c in BASE_COLUMNS.split(","))
        rows = await self._db.fetchall(
            f"SELECT {item_cols}, {base_cols} FROM knowledge_item i JOIN knowledge_base b ON b.id = i.base_id "
            "WHERE i.id = ?",
            (item_id,),
        )
        if not rows:
            raise NotFoundError("Knowledge item", item_id)
        row = rows[0]
        keys = row.keys()
        item = item_from_row({k[2:]: row[k] for k in keys if k.startswith("i_")})
        base = base_from_row({k[2:]: row[k] for k in keys if k.startswith("b_")})
        return item, base

    async def get_many(self, item_ids: Sequence[str]) -> list[KnowledgeItem]:
        """Existing items among `item_ids`, in the given order (missing ones are skipped)."""
        async with self._db.read() as conn:
            return await self._get_many(conn, list(item_ids))

    async def list_page(
        self, base_id: Any, *, type: Any = None, group_id: Any = None, page: Any = 1, limit: Any = 20
    ) -> Page[KnowledgeItem]:
        """Newest first. `group_id=None` lists roots, a container id its children,
        `ANY_GROUP` every item of the base."""
        base_id = require_id(base_id, "base_id")
        item_type = require_item_type(type)
        group = require_group_filter(group_id)
        page, limit = require_page(page, limit)
        where, params = ["base_id = ?"], [base_id]
        if group is None:
            where.append("group_id IS NULL")
        elif group is not ANY_GROUP:
            where.append("group_id = ?")
            params.append(group)
        if item_type is not None:
            where.append("type = ?")
            params.append(item_type.value)
        clause = " AND ".join(where)
        async with self._db.read() as conn:
            await self._require_base(conn, base_id)
            async with conn.execute(f"SELECT count(*) FROM knowledge_item WHERE {clause}", params) as cur:
                (total,) = await cur.fetchone()
            async with conn.execute(
                f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE {clause} "
                "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (*params, limit, (page - 1) * limit),
            ) as cur:
                rows = await cur.fetchall()
        return Page([item_from_row(r) for r in rows], total, page, limit)

    async def list_all(self, base_id: str, *, roots_only: bool = False) -> list[KnowledgeItem]:
        sql = f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE base_id = ?"
        if roots_only:
            sql += " AND group_id IS NULL"
        rows = await self._db.fetchall(sql + " ORDER BY created_at, id", (base_id,))
        return [item_from_row(r) for r in rows]

    async def children(self, parent_id: str) -> list[KnowledgeItem]:
        rows = await self._db.fetchall(
            f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE group_id = ? ORDER BY created_at, id", (parent_id,)
        )
        return [item_from_row(r) for r in rows]

    async def descendants(self, item_ids: Sequence[str]) -> list[KnowledgeItem]:
        """Every item below the given ones (not the given ones themselves), fresh from the database."""
        out: list[KnowledgeItem] = []
        async with self._db.read() as conn:
            for part in _chunks(list(item_ids)):
                async with conn.execute(
                    f"""WITH RECURSIVE tree(id) AS (
                            SELECT id FROM knowledge_item WHERE group_id IN ({_marks(len(part))})
                            UNION ALL
                            SELECT k.id FROM knowledge_item k JOIN tree t ON k.group_id = t.id)
                        SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id IN (SELECT id FROM tree)""",
                    part,
                ) as cur:
                    out.extend(item_from_row(r) for r in await cur.fetchall())
        return out

    async def statuses_below(self, item_ids: Sequence[str]) -> dict[str, ItemStatus]:
        """id -> status of every item below the given ones, in one query per 500 ids:
        what a follower of a folder needs, without building whole items."""
        out: dict[str, ItemStatus] = {}
        async with self._db.read() as conn:
            for part in _chunks(list(item_ids)):
                async with conn.execute(
                    f"""WITH RECURSIVE tree(id) AS (
                            SELECT id FROM knowledge_item WHERE group_id IN ({_marks(len(part))})
                            UNION ALL
                            SELECT k.id FROM knowledge_item k JOIN tree t ON k.group_id = t.id)
                        SELECT k.id, k.status FROM knowledge_item k JOIN tree t ON k.id = t.id""",
                    part,
                ) as cur:
                    out.update((r[0], ItemStatus(r[1])) for r in await cur.fetchall())
        return out

    async def leaves_under(self, item_ids: Sequence[str]) -> list[KnowledgeItem]:
        """The leaf items among the given ones and their descendants."""
        given = await self.get_many(item_ids)
        below = await self.descendants([i.id for i in given if i.type in CONTAINER_TYPES])
        return [i for i in [*given, *below] if i.type not in CONTAINER_TYPES]

    async def by_status(self, statuses: Iterable[ItemStatus]) -> list[KnowledgeItem]:
        values = [s.value for s in statuses]
        rows = await self._db.fetchall(
            f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE status IN ({_marks(len(values))}) "
            "ORDER BY created_at, id",
            values,
        )
        return [item_from_row(r) for r in rows]

    async def watched_directories(self) -> list[KnowledgeItem]:
        """Root directory items whose folder is watched for changes."""
        rows = await self._db.fetchall(
            f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE type = 'directory' AND group_id IS NULL "
            "AND json_extract(data, '$.watch') = 1 ORDER BY created_at, id"
        )
        return [item_from_row(r) for r in rows]

    async def over_window(self, base_id: str) -> list[KnowledgeItem]:
        """Leaves of a base whose last indexing recorded chunks past the model's window
        (`window_overflow` in their data): one query, only the matching rows."""
        rows = await self._db.fetchall(
            f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE base_id = ? "
            "AND json_extract(data, '$.window_overflow') IS NOT NULL ORDER BY created_at, id",
            (base_id,),
        )
        return [item_from_row(r) for r in rows]

    async def count_by_base(self) -> dict[str, int]:
        rows = await self._db.fetchall("SELECT base_id, count(*) AS n FROM knowledge_item GROUP BY base_id")
        return {r["base_id"]: r["n"] for r in rows}

    async def collapse_to_roots(self, base_id: str, item_ids: Any) -> list[KnowledgeItem]:
        """Reduce a selection to its top-most members: an item whose ancestor is also
        selected is covered by that ancestor. Items of another base are refused."""
        ids = require_ids(item_ids, "item_ids")
        async with self._db.read() as conn:
            items = await self._get_many(conn, ids)
            found = {i.id for i in items}
            missing = [i for i in ids if i not in found]
            if missing:
                raise NotFoundError("Knowledge item", missing[0])
            foreign = [i.id for i in items if i.base_id != base_id]
            if foreign:
                raise ValidationError.field("item_ids", f"item {foreign[0]} belongs to another knowledge base")
            selected = set(found)
            roots: list[KnowledgeItem] = []
            for item in items:
                parent = item.group_id
                covered = False
                while parent is not None:
                    if parent in selected:
                        covered = True
                        break
                    async with conn.execute("SELECT group_id FROM knowledge_item WHERE id = ?", (parent,)) as cur:
                        row = await cur.fetchone()
                    parent = row["group_id"] if row else None
                if not covered:
                    roots.append(item)
        return roots

    # --- status -----------------------------------------------------------

    async def set_status(
        self,
        item_id: str,
        status: ItemStatus,
        phase: ItemPhase | None = None,
        error: str | None = None,
        *,
        data: ItemData | None = None,
    ) -> list[KnowledgeItem]:
        """Write one item's state (and, optionally, its payload in the same statement),
        then reconcile its ancestors. Returns every changed item."""
        return await self.set_status_many([item_id], status, phase, error, data=data)

    async def set_status_many(
        self,
        item_ids: Sequence[str],
        status: ItemStatus,
        phase: ItemPhase | None = None,
        error: str | None = None,
        *,
        data: ItemData | None = None,
    ) -> list[KnowledgeItem]:
        if not item_ids:
            return []
        if data is not None and len(set(item_ids)) != 1:
            raise ValidationError.field("data", "can only be written for one item at a time")
        # plain strings ("completed") are accepted too; `.value` below needs the enums
        status = require_status(status)
        phase = require_phase(phase)
        if error is not None and not isinstance(error, str):
            raise ValidationError.field("error", "must be a message string")
        ids = list(dict.fromkeys(item_ids))
        # the indexing hot path: the whole transaction runs on the database thread in one hop
        return await self._db.run_in_transaction(lambda conn: _write_status(conn, ids, status, phase, error, data))

    async def set_states(
        self, entries: Sequence[tuple[str, ItemStatus, ItemPhase | None]]
    ) -> list[KnowledgeItem]:
        """Write several items' (status, phase) in one transaction, reconciling their
        ancestors: the runtime's group commit of the phase changes of concurrent tasks.
        Returns every changed item once (its latest state)."""
        groups: dict[tuple[ItemStatus, ItemPhase | None], list[str]] = {}
        for item_id, status, phase in entries:
            key = (require_status(status), require_phase(phase))
            groups.setdefault(key, []).append(item_id)

        def run(conn: sqlite3.Connection) -> list[KnowledgeItem]:
            changed: dict[str, KnowledgeItem] = {}
            for (status, phase), ids in groups.items():
                for item in _write_status(conn, list(dict.fromkeys(ids)), status, phase, None, None):
                    changed[item.id] = item
            return list(changed.values())

        return await self._db.run_in_transaction(run)

    async def complete_many(self, entries: Sequence[tuple[str, ItemData | None]]) -> list[KnowledgeItem]:
        """Mark several leaves completed (each with its recorded payload, if any) in one
        transaction, reconciling each parent once: the status half of a group commit."""

        def run(conn: sqlite3.Connection) -> list[KnowledgeItem]:
            changed: list[KnowledgeItem] = []
            parents: set[str] = set()
            for item_id, data in entries:
                written = _write_status(conn, [item_id], ItemStatus.COMPLETED, None, None, data, reconcile=False)
                changed.extend(written[:1])
                if written[0].group_id is not None:
                    parents.add(written[0].group_id)
            return changed + _reconcile_many(conn, parents)

        return await self._db.run_in_transaction(run)

    async def reconcile(self, container_id: str) -> list[KnowledgeItem]:
        """Recompute a container (and its ancestors) from its own phase and children."""
        return await self._db.run_in_transaction(lambda conn: _reconcile_many(conn, {container_id}))

    async def update_data(self, item_id: str, data: ItemData) -> KnowledgeItem:
        async with self._db.transaction() as conn:
            item = await self._get(conn, item_id)
            if type(data) is not type(item.data):
                raise ValidationError.field("data", f"does not match a {item.type} item")
            await conn.execute(
                "UPDATE knowledge_item SET data = ?, updated_at = ? WHERE id = ?",
                (data_to_json(data), utc_now(), item_id),
            )
            return await self._get(conn, item_id)

    # --- deletion ---------------------------------------------------------

    async def delete(self, item_ids: Sequence[str]) -> list[KnowledgeItem]:
        """Delete items (descendants cascade) and reconcile their surviving parents."""
        ids = list(dict.fromkeys(item_ids))

        def run(conn: sqlite3.Connection) -> list[KnowledgeItem]:
            parents: set[str] = set()
            for part in _chunks(ids):
                marks = _marks(len(part))
                rows = conn.execute(f"SELECT group_id FROM knowledge_item WHERE id IN ({marks})", part).fetchall()
                parents |= {r["group_id"] for r in rows if r["group_id"] is not None}
                conn.execute(f"DELETE FROM knowledge_item WHERE id IN ({marks})", part)
            return _reconcile_many(conn, parents - set(ids))

        return await self._db.run_in_transaction(run)

    async def delete_children(self, container_id: str) -> int:
        """Drop a container's whole subtree (its own row stays), e.g. before a fresh prepare."""
        async with self._db.transaction() as conn:
            cur = await conn.execute("DELETE FROM knowledge_item WHERE group_id = ?", (container_id,))
            return cur.rowcount

    # --- helpers ----------------------------------------------------------

    async def _require_base(self, conn: AsyncConnection, base_id: str) -> None:
        async with conn.execute("SELECT 1 FROM knowledge_base WHERE id = ?", (base_id,)) as cur:
            if await cur.fetchone() is None:
                raise NotFoundError("Knowledge base", base_id)

    async def _get(self, conn: AsyncConnection, item_id: str) -> KnowledgeItem:
        rows = await conn.execute_fetchall(f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id = ?", (item_id,))
        if not rows:
            raise NotFoundError("Knowledge item", item_id)
        return item_from_row(rows[0])

    async def _get_many(self, conn: AsyncConnection, item_ids: list[str]) -> list[KnowledgeItem]:
        found: dict[str, KnowledgeItem] = {}
        for part in _chunks(item_ids):
            async with conn.execute(
                f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id IN ({_marks(len(part))})", part
            ) as cur:
                for row in await cur.fetchall():
                    found[row["id"]] = item_from_row(row)
        return [found[i] for i in dict.fromkeys(item_ids) if i in found]



def _write_status(
    conn: sqlite3.Connection,
    ids: list[str],
    status: ItemStatus,
    phase: ItemPhase | None,
    error: str | None,
    data: ItemData | None,
    *,
    reconcile: bool = True,
) -> list[KnowledgeItem]:
    before: dict[str, Any] = {}
    for part in _chunks(ids):
        rows = conn.execute(
            f"SELECT id, type, status, group_id FROM knowledge_item WHERE id IN ({_marks(len(part))})", part
        ).fetchall()
        before.update({r["id"]: r for r in rows})
    missing = [i for i in ids if i not in before]
    if missing:
        raise NotFoundError("Knowledge item", missing[0])
    for row in before.values():
        check_state(ItemType(row["type"]), status, phase, error)
        if data is not None and type(data) is not ITEM_DATA_CLASSES[ItemType(row["type"])]:
            raise ValidationError.field("data", f"does not match a {row['type']} item")
    now = utc_now()
    updated: dict[str, KnowledgeItem] = {}
    set_data = ", data = ?" if data is not None else ""
    extra = (data_to_json(data),) if data is not None else ()
    for part in _chunks(ids):
        rows = conn.execute(
            f"UPDATE knowledge_item SET status = ?, phase = ?, error = ?, updated_at = ?{set_data} "
            f"WHERE id IN ({_marks(len(part))}) RETURNING {ITEM_COLUMNS}",
            (status.value, phase.value if phase else None, error, now, *extra, *part),
        ).fetchall()
        updated.update({r["id"]: item_from_row(r) for r in rows})
    if not reconcile:
        return [updated[i] for i in ids]
    # a parent's state depends on its children's statuses only: a phase change cannot alter it
    parents = {r["group_id"] for r in before.values() if r["group_id"] is not None and r["status"] != status}
    if status == ItemStatus.PROCESSING and phase is None:
        # a container whose own work is done takes its state from its children
        parents |= {r["id"] for r in before.values() if ItemType(r["type"]) in CONTAINER_TYPES}
    reconciled = {i.id: i for i in _reconcile_many(conn, parents)}
    changed = [reconciled.pop(i, updated[i]) for i in ids]
    return changed + list(reconciled.values())


def _reconcile_many(conn: sqlite3.Connection, parents: set[str]) -> list[KnowledgeItem]:
    changed: dict[str, KnowledgeItem] = {}
    original: dict[str, tuple[str, str | None, str | None]] = {}
    for parent in parents:
        for item in _reconcile_up(conn, parent, original):
            changed[item.id] = item
    # Walks from several parents can pass the same ancestor: one walk may flip it (its
    # other child not yet reconciled) and a later one flip it back. It has not changed.
    return [
        i for i in changed.values()
        if (i.status.value, i.phase.value if i.phase else None, i.error) != original[i.id]
    ]


def _reconcile_up(
    conn: sqlite3.Connection, container_id: str | None, original: dict[str, tuple[str, str | None, str | None]]
) -> list[KnowledgeItem]:
    """Recompute a container from its own phase and its children, then its parent, and so
    on, stopping at the first ancestor whose state does not change. `original` records
    each container's state before this call first wrote it."""
    changed: list[KnowledgeItem] = []
    while container_id is not None:
        row = conn.execute(
            # EXISTS, not count(*): the rule needs only "any", and a count would read every
            # active child of a 100,000-file folder after each of its files finished
            """SELECT k.status, k.phase, k.error, k.group_id,
                 EXISTS (SELECT 1 FROM knowledge_item c
                   WHERE c.group_id = k.id AND c.status IN ('idle', 'processing')) AS active,
                 EXISTS (SELECT 1 FROM knowledge_item c
                   WHERE c.group_id = k.id AND c.status = 'failed') AS failed
               FROM knowledge_item k WHERE k.id = ?""",
            (container_id,),
        ).fetchone()
        if row is None:
            break
        counts = {"processing": row["active"], "failed": row["failed"]}
        status, phase, error = derive_container_state(row["phase"], counts)
        if (status, phase, error) == (row["status"], row["phase"], row["error"]):
            break  # unchanged: nothing above can change either
        original.setdefault(container_id, (row["status"], row["phase"], row["error"]))
        updated = conn.execute(
            f"UPDATE knowledge_item SET status = ?, phase = ?, error = ?, updated_at = ? WHERE id = ? "
            f"RETURNING {ITEM_COLUMNS}",
            (status, phase, error, utc_now(), container_id),
        ).fetchone()
        changed.append(item_from_row(updated))
        container_id = row["group_id"]
    return changed


def derive_container_state(
    own_phase: str | None, child_counts: dict[str, int]
) -> tuple[str, str | None, str | None]:
    """The reconciliation rule, as a pure function of the container's phase and its
    children's status counts: (status, phase, error)."""
    if own_phase is not None:
        return ItemStatus.PROCESSING.value, own_phase, None
    if child_counts.get("idle", 0) or child_counts.get("processing", 0):
        return ItemStatus.PROCESSING.value, None, None
    if child_counts.get("failed", 0):
        return ItemStatus.FAILED.value, None, CHILD_FAILED_MESSAGE
    return ItemStatus.COMPLETED.value, None, None

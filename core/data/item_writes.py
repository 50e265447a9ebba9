"""ItemWrites: every write of the item table, status rules and container reconciliation.

A container's (directory / sitemap) status is never written by hand once it has
children: after every child status change or delete, `_reconcile_up` recomputes
the parent from its own phase and its immediate children and walks upward,
stopping as soon as an ancestor is unchanged. Every mutating call returns the
items whose state changed (the item itself and any reconciled ancestors).

Only :class:`ktui.core.runtime.status.StateWriter` uses this module (an
import-linter contract says so): it publishes an event for each item a write
returns, so no write can forget its event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ktui.core.catalogue import SyncConn, WriteGuard
from ktui.core.data.guarded_writes import check_parent, child_rows, insert_children, require_all, write_data
from ktui.core.data.item_service import ChildSpec, KnowledgeItemService, id_chunks, marks
from ktui.core.data.item_validation import require_phase, require_status
from ktui.core.data.rows import ITEM_COLUMNS, data_to_json, item_from_row
from ktui.core.data.validation import ValidItem
from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.ids import new_id, utc_now
from ktui.core.models import (
    CONTAINER_TYPES,
    ITEM_DATA_CLASSES,
    ItemData,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeItem,
)

CHILD_FAILED_MESSAGE = "One or more child items failed"


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



class ItemWrites(KnowledgeItemService):
    """The item table's writes (and, inherited, its reads)."""

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
        self, base_id: str, parent_id: str, children: Sequence[ChildSpec], *, guard: WriteGuard | None = None
    ) -> list[KnowledgeItem]:
        """Insert a container's expansion (nested directories included) in one transaction.

        Leaves start `processing` (queued), nested containers `processing` too
        (they complete by reconciliation once their leaves do). Returns the
        created items, parents before children. With `guard` (called with the parent's
        id), all or nothing: a refusal raises TaskInterrupted and nothing is inserted.
        """
        if guard is not None:
            return await self._db.run_in_transaction(
                lambda conn: insert_children(conn, base_id, parent_id, children, guard))
        async with self._db.transaction() as conn:
            check_parent(await self._get(conn, parent_id), base_id)
            rows = child_rows(base_id, parent_id, children)
            await conn.executemany(
                f"INSERT INTO knowledge_item ({ITEM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            return await self._get_many(conn, [r[0] for r in rows])

    # --- status -----------------------------------------------------------

    async def set_status(
        self,
        item_id: str,
        status: ItemStatus,
        phase: ItemPhase | None = None,
        error: str | None = None,
        *,
        data: ItemData | None = None,
        guard: WriteGuard | None = None,
    ) -> list[KnowledgeItem]:
        """Write one item's state (and, optionally, its payload in the same statement),
        then reconcile its ancestors. Returns every changed item (none when `guard`,
        see core/catalogue.py, refused it)."""
        return await self.set_status_many([item_id], status, phase, error, data=data, guard=guard)

    async def set_status_many(
        self,
        item_ids: Sequence[str],
        status: ItemStatus,
        phase: ItemPhase | None = None,
        error: str | None = None,
        *,
        data: ItemData | None = None,
        guard: WriteGuard | None = None,
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
        if guard is None:
            return await self._db.run_in_transaction(lambda conn: _write_status(conn, ids, status, phase, error, data))

        def guarded(conn: SyncConn) -> list[KnowledgeItem]:
            allowed = set(guard(conn, ids))  # a set: a refresh may write 100,000 ids
            return _write_status(conn, [i for i in ids if i in allowed], status, phase, error, data) if allowed else []

        return await self._db.run_in_transaction(guarded)

    async def set_states(
        self, entries: Sequence[tuple[str, ItemStatus, ItemPhase | None]], *, guard: WriteGuard | None = None
    ) -> list[KnowledgeItem]:
        """Write several items' (status, phase) in one transaction, reconciling their
        ancestors: the runtime's group commit of the phase changes of concurrent tasks.
        Returns every changed item once (its latest state). With `guard`
        (core/catalogue.py), only the items it allows are written."""
        groups: dict[tuple[ItemStatus, ItemPhase | None], list[str]] = {}
        for item_id, status, phase in entries:
            key = (require_status(status), require_phase(phase))
            groups.setdefault(key, []).append(item_id)

        def run(conn: SyncConn) -> list[KnowledgeItem]:
            changed: dict[str, KnowledgeItem] = {}
            allowed = set(guard(conn, [e[0] for e in entries])) if guard is not None else None
            for (status, phase), ids in groups.items():
                todo = [i for i in dict.fromkeys(ids) if allowed is None or i in allowed]
                if not todo:
                    continue
                for item in _write_status(conn, todo, status, phase, None, None):
                    changed[item.id] = item
            return list(changed.values())

        return await self._db.run_in_transaction(run)

    async def complete_many(
        self, entries: Sequence[tuple[str, ItemData | None]], *, guard: WriteGuard | None = None
    ) -> list[KnowledgeItem]:
        """Mark several leaves completed (each with its recorded payload, if any) in one
        transaction, reconciling each parent once: the status half of a group commit.
        With `guard` (core/catalogue.py), only the leaves it allows are completed."""

        def run(conn: SyncConn) -> list[KnowledgeItem]:
            changed: list[KnowledgeItem] = []
            parents: set[str] = set()
            todo = entries
            if guard is not None:
                allowed = set(guard(conn, [item_id for item_id, _ in entries]))
                todo = [e for e in entries if e[0] in allowed]
            for item_id, data in todo:
                written = _write_status(conn, [item_id], ItemStatus.COMPLETED, None, None, data, reconcile=False)
                changed.extend(written[:1])
                if written[0].group_id is not None:
                    parents.add(written[0].group_id)
            return changed + _reconcile_many(conn, parents)

        return await self._db.run_in_transaction(run)

    async def reconcile(self, container_id: str) -> list[KnowledgeItem]:
        """Recompute a container (and its ancestors) from its own phase and children."""
        return await self._db.run_in_transaction(lambda conn: _reconcile_many(conn, {container_id}))

    async def update_data(self, item_id: str, data: ItemData, *, guard: WriteGuard | None = None) -> KnowledgeItem:
        """An item's payload. With `guard` (called with the item's id), a refusal raises
        TaskInterrupted and nothing is written."""
        if guard is not None:
            return await self._db.run_in_transaction(lambda conn: write_data(conn, item_id, data, guard))
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

    async def delete(self, item_ids: Sequence[str], *, guard: WriteGuard | None = None) -> list[KnowledgeItem]:
        """Delete items (descendants cascade) and reconcile their surviving parents. With
        `guard`, all or nothing: a refusal raises TaskInterrupted and nothing is deleted."""
        ids = list(dict.fromkeys(item_ids))

        def run(conn: SyncConn) -> list[KnowledgeItem]:
            if guard is not None:
                require_all(guard, conn, ids)
            parents: set[str] = set()
            for part in id_chunks(ids):
                in_list = marks(len(part))
                rows = conn.execute(f"SELECT group_id FROM knowledge_item WHERE id IN ({in_list})", part).fetchall()
                parents |= {r["group_id"] for r in rows if r["group_id"] is not None}
                conn.execute(f"DELETE FROM knowledge_item WHERE id IN ({in_list})", part)
            return _reconcile_many(conn, parents - set(ids))

        return await self._db.run_in_transaction(run)

    async def delete_children(self, container_id: str) -> int:
        """Drop a container's whole subtree (its own row stays), e.g. before a fresh prepare."""
        async with self._db.transaction() as conn:
            cur = await conn.execute("DELETE FROM knowledge_item WHERE group_id = ?", (container_id,))
            return cur.rowcount


def _write_status(
    conn: SyncConn,
    ids: list[str],
    status: ItemStatus,
    phase: ItemPhase | None,
    error: str | None,
    data: ItemData | None,
    *,
    reconcile: bool = True,
) -> list[KnowledgeItem]:
    before: dict[str, Any] = {}
    for part in id_chunks(ids):
        rows = conn.execute(
            f"SELECT id, type, status, group_id FROM knowledge_item WHERE id IN ({marks(len(part))})", part
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
    for part in id_chunks(ids):
        rows = conn.execute(
            f"UPDATE knowledge_item SET status = ?, phase = ?, error = ?, updated_at = ?{set_data} "
            f"WHERE id IN ({marks(len(part))}) RETURNING {ITEM_COLUMNS}",
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


def _reconcile_many(conn: SyncConn, parents: set[str]) -> list[KnowledgeItem]:
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
    conn: SyncConn, container_id: str | None, original: dict[str, tuple[str, str | None, str | None]]
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

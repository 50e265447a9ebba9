"""Item writes whose transaction a WriteGuard opens (core/catalogue.py), in one
`run_in_transaction` hop, and the parts they share with item_writes.py.

On a shared catalogue a folder's or sitemap's prepare and refresh write only while its
process still holds the container (core/runtime/claims.py, ``holding_container``): the
guard runs first in the write's own transaction, so the check and the write are one.
These writes are all or nothing: a guard that leaves an id out refuses the whole write
(TaskInterrupted, the transaction rolled back). Only item_writes.py imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ktui.core.catalogue import SyncConn, WriteGuard
from ktui.core.data.item_service import ChildSpec, id_chunks, marks
from ktui.core.data.rows import ITEM_COLUMNS, data_to_json, item_from_row
from ktui.core.errors import NotFoundError, TaskInterrupted, ValidationError
from ktui.core.ids import new_id, utc_now
from ktui.core.models import CONTAINER_TYPES, ItemData, ItemStatus, KnowledgeItem


def require_all(guard: WriteGuard, conn: SyncConn, ids: list[str]) -> None:
    """An all-or-nothing write's guard: any id left out refuses the whole write (the
    transaction rolls back; on a shared catalogue, the claim was lost)."""
    if set(guard(conn, ids)) != set(ids):
        raise TaskInterrupted("claimed by another process")


def check_parent(parent: KnowledgeItem, base_id: str) -> None:
    if parent.base_id != base_id:
        raise ValidationError.field("parent_id", "belongs to another knowledge base")
    if parent.type not in CONTAINER_TYPES:
        raise ValidationError.field("parent_id", "group owner must be a directory or sitemap item")


def child_rows(base_id: str, parent_id: str, children: Sequence[ChildSpec]) -> list[tuple[Any, ...]]:
    """The rows of a container's expansion, parents before their children."""
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
    return rows


def _get_one(conn: SyncConn, item_id: str) -> KnowledgeItem:
    row = conn.execute(f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id = ?", (item_id,)).fetchone()
    if row is None:
        raise NotFoundError("Knowledge item", item_id)
    return item_from_row(row)


def insert_children(conn: SyncConn, base_id: str, parent_id: str, children: Sequence[ChildSpec],
                     guard: WriteGuard) -> list[KnowledgeItem]:
    """`create_children` under a guard, in one `run_in_transaction` hop."""
    require_all(guard, conn, [parent_id])
    check_parent(_get_one(conn, parent_id), base_id)
    rows = child_rows(base_id, parent_id, children)
    conn.executemany(f"INSERT INTO knowledge_item ({ITEM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    found: dict[str, KnowledgeItem] = {}
    for ids in id_chunks([r[0] for r in rows]):
        for row in conn.execute(f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id IN ({marks(len(ids))})",
                                ids).fetchall():
            found[row["id"]] = item_from_row(row)
    return [found[r[0]] for r in rows]


def write_data(conn: SyncConn, item_id: str, data: ItemData, guard: WriteGuard) -> KnowledgeItem:
    """`update_data` under a guard, in one `run_in_transaction` hop."""
    require_all(guard, conn, [item_id])
    item = _get_one(conn, item_id)
    if type(data) is not type(item.data):
        raise ValidationError.field("data", f"does not match a {item.type} item")
    conn.execute("UPDATE knowledge_item SET data = ?, updated_at = ? WHERE id = ?",
                 (data_to_json(data), utc_now(), item_id))
    return _get_one(conn, item_id)

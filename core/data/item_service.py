"""KnowledgeItemService: reading the item table (SQLite or PostgreSQL), with the validation of what callers ask.

Writes live in :mod:`ktui.core.data.item_writes`, which only the runtime's state
writer (:mod:`ktui.core.runtime.status`) may use, so that every write publishes its
events. The helpers here (`_get`, `_get_many`, `_require_base`) are shared with it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ktui.core.catalogue import AsyncConn, Catalogue
from ktui.core.data.item_validation import require_group_filter, require_item_type
from ktui.core.data.rows import BASE_COLUMNS, ITEM_COLUMNS, base_from_row, item_from_row
from ktui.core.data.validation import require_cursor_limit, require_id, require_ids, require_page
from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import (
    ANY_GROUP,
    CONTAINER_TYPES,
    CursorPage,
    ItemData,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
    Page,
)

SQL_VARS = 500  # ids per IN (...) list, well under SQLite's variable limit


def tree_below(count: int) -> str:
    """A `WITH` clause naming `tree(id)`: every item below the `count` parent ids bound
    as parameters (children, their children, ...), not the parents themselves."""
    return (f"WITH RECURSIVE tree(id) AS (SELECT id FROM knowledge_item WHERE group_id IN ({marks(count)}) "
            "UNION ALL SELECT k.id FROM knowledge_item k JOIN tree t ON k.group_id = t.id) ")


@dataclass
class ChildSpec:
    """A child to create under a container; directories may carry their own children."""

    type: ItemType
    data: ItemData
    children: list[ChildSpec] = field(default_factory=list)


def id_chunks(values: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(values), SQL_VARS):
        yield values[i : i + SQL_VARS]


def marks(n: int) -> str:
    return ",".join("?" * n)


def encode_cursor(item: KnowledgeItem) -> str:
    """The opaque position after `item` in a keyset listing: its (created_at, id), the
    listing's total order (ids are unique, so ties of created_at are broken), in
    URL-safe base64 so that it travels in a query string as is."""
    raw = json.dumps([item.created_at, item.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(value: Any) -> tuple[str, str] | None:
    """(created_at, id) of a cursor from `encode_cursor`; None for None (the first page)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 1000:
        raise ValidationError.field("cursor", "must be a cursor a previous page returned")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        position = json.loads(raw)
    except (binascii.Error, ValueError):
        raise ValidationError.field("cursor", "must be a cursor a previous page returned") from None
    if not (isinstance(position, list) and len(position) == 2 and all(isinstance(p, str) for p in position)):
        raise ValidationError.field("cursor", "must be a cursor a previous page returned")
    return position[0], position[1]


class KnowledgeItemService:
    def __init__(self, db: Catalogue):
        self._db = db

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
        where, params = _listing_filter(base_id, group, item_type)
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

    async def list_after(
        self,
        base_id: Any,
        *,
        type: Any = None,
        group_id: Any = None,
        cursor: Any = None,
        limit: Any = 100,
        newest_first: bool = True,
    ) -> CursorPage[KnowledgeItem]:
        """A keyset page: the items after `cursor` in (created_at, id) order (descending
        when `newest_first`, as `list_page`), filtered as `list_page` is. Each page is one
        index range read from where the last one ended (`idx_item_base_created` for every
        level, `idx_item_base_group` for one), with no count: listing a whole base costs
        O(n) however deep into it a page is, where pages by number cost O(offset) each."""
        base_id = require_id(base_id, "base_id")
        item_type = require_item_type(type)
        group = require_group_filter(group_id)
        after = decode_cursor(cursor)
        limit = require_cursor_limit(limit)
        where, params = _listing_filter(base_id, group, item_type)
        if after is not None:
            where.append(f"(created_at, id) {'<' if newest_first else '>'} (?, ?)")
            params.extend(after)
        direction = "DESC" if newest_first else "ASC"
        async with self._db.read() as conn:
            await self._require_base(conn, base_id)
            async with conn.execute(
                f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE {' AND '.join(where)} "
                f"ORDER BY created_at {direction}, id {direction} LIMIT ?",
                (*params, limit + 1),  # one more than asked says whether another page follows
            ) as cur:
                rows = await cur.fetchall()
        items = [item_from_row(r) for r in rows[:limit]]
        return CursorPage(items, encode_cursor(items[-1]) if len(rows) > limit else None)

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
            for part in id_chunks(list(item_ids)):
                async with conn.execute(
                    tree_below(len(part)) + f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id IN (SELECT id FROM tree)",
                    part,
                ) as cur:
                    out.extend(item_from_row(r) for r in await cur.fetchall())
        return out

    async def statuses_below(self, item_ids: Sequence[str]) -> dict[str, ItemStatus]:
        """id -> status of every item below the given ones, in one query per 500 ids:
        what a follower of a folder needs, without building whole items."""
        out: dict[str, ItemStatus] = {}
        async with self._db.read() as conn:
            for part in id_chunks(list(item_ids)):
                async with conn.execute(
                    tree_below(len(part)) + "SELECT k.id, k.status FROM knowledge_item k JOIN tree t ON k.id = t.id",
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
            f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE status IN ({marks(len(values))}) "
            "ORDER BY created_at, id",
            values,
        )
        return [item_from_row(r) for r in rows]

    async def unfinished_page(
        self, status: ItemStatus, after: int, limit: int, *, errors: Sequence[str] = (), error_prefix: str = ""
    ) -> list[tuple[int, str, bool]]:
        """(rowid, id, is_root) of up to `limit` items with this status after rowid `after`,
        in rowid order: recovery's look at what is unfinished, a page at a time (the
        status index holds the rowids, so each page is a short index range). For `failed`,
        only those whose error is one of `errors` or starts with `error_prefix`."""
        sql = "SELECT rowid, id, group_id IS NULL FROM knowledge_item WHERE status = ? AND rowid > ?"
        params: list[Any] = [status.value, after]
        if status == ItemStatus.FAILED:
            tests = [f"error IN ({marks(len(errors))})"] if errors else []
            params += list(errors)
            if error_prefix:
                tests.append("substr(error, 1, ?) = ?")
                params += [len(error_prefix), error_prefix]
            sql += f" AND ({' OR '.join(tests) or '1 = 0'})"
        rows = await self._db.fetchall(sql + " ORDER BY rowid LIMIT ?", (*params, limit))
        return [(int(r[0]), str(r[1]), bool(r[2])) for r in rows]

    async def has_children(self, parent_id: str) -> bool:
        row = await self._db.fetchone("SELECT EXISTS (SELECT 1 FROM knowledge_item WHERE group_id = ?)", (parent_id,))
        return bool(row and row[0])

    async def watched_directories(self) -> list[KnowledgeItem]:
        """Root directory items whose folder is watched for changes."""
        rows = await self._db.fetchall(
            f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE type = 'directory' AND group_id IS NULL "
            f"AND {self._db.dialect.json_true('data', 'watch')} ORDER BY created_at, id"
        )
        return [item_from_row(r) for r in rows]

    async def over_window(self, base_id: str) -> list[KnowledgeItem]:
        """Leaves of a base whose last indexing recorded chunks past the model's window
        (`window_overflow` in their data): one query, only the matching rows."""
        rows = await self._db.fetchall(
            f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE base_id = ? "
            f"AND {self._db.dialect.json_text('data', 'window_overflow')} IS NOT NULL ORDER BY created_at, id",
            (base_id,),
        )
        return [item_from_row(r) for r in rows]

    async def processing_count(self, base_id: str) -> int:
        """Items of a base still `processing`, whoever indexes them (this process, a holder
        beside this reader, another machine on a shared store): a search says the base is
        being indexed even from a process that queued none of it."""
        row = await self._db.fetchone(
            "SELECT count(*) FROM knowledge_item WHERE status = 'processing' AND base_id = ?", (base_id,))
        return int(row[0]) if row else 0

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

    # --- helpers ----------------------------------------------------------

    async def _require_base(self, conn: AsyncConn, base_id: str) -> None:
        async with conn.execute("SELECT 1 FROM knowledge_base WHERE id = ?", (base_id,)) as cur:
            if await cur.fetchone() is None:
                raise NotFoundError("Knowledge base", base_id)

    async def _get(self, conn: AsyncConn, item_id: str) -> KnowledgeItem:
        rows = await conn.execute_fetchall(f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id = ?", (item_id,))
        if not rows:
            raise NotFoundError("Knowledge item", item_id)
        return item_from_row(rows[0])

    async def _get_many(self, conn: AsyncConn, item_ids: list[str]) -> list[KnowledgeItem]:
        found: dict[str, KnowledgeItem] = {}
        for part in id_chunks(item_ids):
            async with conn.execute(
                f"SELECT {ITEM_COLUMNS} FROM knowledge_item WHERE id IN ({marks(len(part))})", part
            ) as cur:
                for row in await cur.fetchall():
                    found[row["id"]] = item_from_row(row)
        return [found[i] for i in dict.fromkeys(item_ids) if i in found]


def _listing_filter(base_id: str, group: Any, item_type: Any) -> tuple[list[str], list[Any]]:
    """The WHERE terms and parameters of a listing (pages by number or by cursor): the
    base, then roots (`group` None), one container's children, or every level (ANY_GROUP),
    and the type when one is asked for."""
    where, params = ["base_id = ?"], [base_id]
    if group is None:
        where.append("group_id IS NULL")
    elif group is not ANY_GROUP:
        where.append("group_id = ?")
        params.append(group)
    if item_type is not None:
        where.append("type = ?")
        params.append(item_type.value)
    return where, params

"""KnowledgeBaseService: reading bases and the groups that organise them (SQLite or PostgreSQL).

Writes live in :mod:`ktui.core.data.base_writes`, which only the runtime's state
writer (:mod:`ktui.core.runtime.status`) may use, so that every write publishes its
event.
"""

from __future__ import annotations

from typing import Any

from ktui.core.catalogue import AsyncConn, Catalogue
from ktui.core.data.rows import BASE_COLUMNS, base_from_row, group_from_row
from ktui.core.data.validation import require_id, require_page
from ktui.core.errors import BaseUnavailableError, NotFoundError, ValidationError
from ktui.core.models import KnowledgeBase, KnowledgeGroup, Page


class KnowledgeBaseService:
    def __init__(self, db: Catalogue):
        self._db = db

    async def get(self, base_id: Any) -> KnowledgeBase:
        base_id = require_id(base_id, "base_id")
        async with self._db.read() as conn:
            return await self._get(conn, base_id)

    async def _get(self, conn: AsyncConn, base_id: str) -> KnowledgeBase:
        rows = await conn.execute_fetchall(f"SELECT {BASE_COLUMNS} FROM knowledge_base WHERE id = ?", (base_id,))
        if not rows:
            raise NotFoundError("Knowledge base", base_id)
        return base_from_row(rows[0])

    async def list_page(self, page: Any = 1, limit: Any = 20) -> Page[KnowledgeBase]:
        page, limit = require_page(page, limit)
        async with self._db.read() as conn:
            async with conn.execute("SELECT count(*) FROM knowledge_base") as cur:
                (total,) = await cur.fetchone()
            async with conn.execute(
                f"SELECT {BASE_COLUMNS} FROM knowledge_base ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (limit, (page - 1) * limit),
            ) as cur:
                rows = await cur.fetchall()
        return Page([base_from_row(r) for r in rows], total, page, limit)

    async def list_all(self) -> list[KnowledgeBase]:
        rows = await self._db.fetchall(f"SELECT {BASE_COLUMNS} FROM knowledge_base ORDER BY created_at DESC, id DESC")
        return [base_from_row(r) for r in rows]

    async def list_groups(self) -> list[KnowledgeGroup]:
        rows = await self._db.fetchall("SELECT * FROM knowledge_group ORDER BY lower(name), id")
        return [group_from_row(r) for r in rows]

    async def _require_group(self, conn: AsyncConn, group_id: str) -> None:
        async with conn.execute("SELECT 1 FROM knowledge_group WHERE id = ?", (group_id,)) as cur:
            if await cur.fetchone() is None:
                raise ValidationError.field("group_id", f"no such group: {group_id}")


def require_runnable(base: KnowledgeBase) -> KnowledgeBase:
    """Refuse indexing/search work on a failed base, saying how to recover."""
    if not base.is_usable:
        raise BaseUnavailableError(base.id, base.name)
    return base

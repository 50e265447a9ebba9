"""The import ledger: which bases an import created, whether it finished, and from what.

`ktui base import` used to create a base and then add its items in batches, so a
kill between the two left a silent partial base (0 to 200 of 350 items in 4 of 12
kills), and importing again made a second copy. The ledger makes an import
all-or-nothing and a repeat visible:

* the new base is recorded as `importing` in the same transaction as its row (the
  importer passes `import_fingerprint` to the base create), and
  `finish` marks it `done` after the last one; the next writable open discards any
  base still `importing` (rows, store files and all) — see `KnowledgeService.open`;
* the fingerprint (sha-256 of the base's entry in the document: name, model,
  settings and items) of each `done` import lets a second import of the same base
  be reported instead of duplicated.

Rows cascade with their base, so deleting the base forgets its import.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from ktui.core.catalogue import AsyncConn, Catalogue


def fingerprint(entry: Any) -> str:
    """A stable sha-256 of one base's planned content (JSON with sorted keys)."""
    text = json.dumps(entry, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def record_import_start(conn: AsyncConn, base_id: str, digest: str) -> None:
    """The `importing` row of a base an import creates, written in the base row's own
    transaction (`BaseWrites._insert`): a kill can never leave the base without it."""
    await conn.execute(
        "INSERT INTO base_import (base_id, fingerprint, state, created_at) VALUES (?, ?, 'importing', ?)",
        (base_id, digest, datetime.now(UTC).isoformat()),
    )


class ImportLedger:
    def __init__(self, db: Catalogue) -> None:
        self._db = db

    async def finish(self, base_id: str) -> None:
        async with self._db.transaction() as conn:
            await conn.execute("UPDATE base_import SET state = 'done' WHERE base_id = ?", (base_id,))

    async def imported_as(self, digest: str) -> str | None:
        """The id of a base a finished import of the same content created (and that still exists)."""
        rows = await self._db.fetchall(
            "SELECT base_id FROM base_import WHERE fingerprint = ? AND state = 'done' ORDER BY created_at LIMIT 1",
            (digest,),
        )
        return str(rows[0][0]) if rows else None

    async def unfinished(self) -> list[str]:
        """Bases an interrupted import left behind."""
        rows = await self._db.fetchall("SELECT base_id FROM base_import WHERE state = 'importing'")
        return [str(r[0]) for r in rows]

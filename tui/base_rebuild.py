"""Reindex a whole base: every top-level item again, forced.

This is what a base whose store is missing or damaged needs (`KnowledgeBase.needs_rebuild`:
its chunks are rebuilt from the items' sources; a damaged file stays set aside), and
what applies new chunk settings to items already indexed. The TUI's "Reindex all" and
`ktui reindex BASE --all` do the same thing.
"""

from __future__ import annotations

from ktui.core.models import KnowledgeBase
from ktui.core.service import KnowledgeService

PAGE = 1000


async def reindex_whole_base(ks: KnowledgeService, base: KnowledgeBase) -> int:
    """Queue every root item of `base` for a forced reindex; returns how many were queued."""
    ids = [item.id async for item in ks.iter_items(base.id, page_size=PAGE)]  # keyset pages: O(n) in all
    if ids:
        await ks.reindex_items(base.id, ids, force=True)
    return len(ids)

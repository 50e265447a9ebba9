"""Retrieval: search one base or several, a base's chunks, similar items.

Nothing here writes but `delete_item_chunk` (a store write under the base's lock).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ktui.core.data.base_service import require_runnable
from ktui.core.data.validation import require_id, require_query, require_top_k
from ktui.core.errors import (
    NotFoundError,
    ValidationError,
)
from ktui.core.models import (
    CONTAINER_TYPES,
    DEFAULT_TOP_K,
    BaseSearchNotice,
    ChunkRecord,
    KnowledgeBase,
    KnowledgeItem,
    SearchFilters,
    SearchMode,
    SearchResponse,
)
from ktui.core.orchestration.common import WorkflowParts, resolve_mode
from ktui.core.search import run_search
from ktui.core.search.filters import allowed_items, require_filters
from ktui.core.search.multi import merge_responses

if TYPE_CHECKING:  # the Knowledge Engine (similar items) is imported by what uses it, not by a search
    from ktui.core.engine import RankResult

log = logging.getLogger(__name__)



class Retrieval(WorkflowParts):

    async def search(
        self, base_id: Any, query: Any, top_k: Any = None, *, mode: Any = None, filters: Any = None
    ) -> SearchResponse:
        base = require_runnable(await self.bases.get(base_id))
        text = require_query(query)
        k = require_top_k(top_k) or base.top_k
        return await self._search_base(base, text, k, resolve_mode(base, mode), require_filters(filters))

    async def search_bases(
        self, base_ids: Any, query: Any, top_k: Any = None, *, mode: Any = None, filters: Any = None
    ) -> SearchResponse:
        """One query over several bases (None = every usable base), merged by relevance."""
        text = require_query(query)
        flt = require_filters(filters)
        if base_ids is None:
            bases = [b for b in await self.bases.list_all() if b.is_usable]
        else:
            if isinstance(base_ids, str) or not isinstance(base_ids, (list, tuple)) or not base_ids:
                raise ValidationError.field("base_ids", "must be a non-empty list of base ids")
            bases = [require_runnable(await self.bases.get(b)) for b in dict.fromkeys(base_ids)]
        explicit_k = require_top_k(top_k)
        k = explicit_k or max((b.top_k for b in bases), default=DEFAULT_TOP_K)
        answers = []
        for base in bases:
            answers.append((base, await self._search_base(base, text, k, resolve_mode(base, mode), flt)))
        return merge_responses(answers, k)

    async def _search_base(
        self, base: KnowledgeBase, text: str, k: int, mode: SearchMode, filters: SearchFilters | None
    ) -> SearchResponse:
        item_filter = None
        if filters is not None:
            items = await self.items.list_all(base.id)
            allowed = await asyncio.to_thread(allowed_items, filters, items)
            item_filter = allowed.__contains__
        store = await self.runtime.store(base)
        response = await run_search(base, store, self.embeddings, text, top_k=k, mode=mode, item_filter=item_filter)
        return await self._while_indexing(base, response)

    async def _while_indexing(self, base: KnowledgeBase, response: SearchResponse) -> SearchResponse:
        """Say so when the base is being indexed or rebuilt (a full reindex empties it
        first), here or by another process (a reader beside the TUI, another machine on a
        shared store: the catalogue's `processing` rows): "No results" then is not an
        answer, and every front end shows the reason (CLI warning, TUI status line,
        HTTP/MCP `reason` and `notices`)."""
        todo = max(self.runtime.queue.active_in(base.id), await self.items.processing_count(base.id))
        if not todo:
            return response
        note = (f"base '{base.name}' is being indexed ({todo} item(s) to go): "
                "results are incomplete until it finishes")
        reason = f"{response.reason}; {note}" if response.reason else note
        return replace(response, reason=reason,
                       notices=(BaseSearchNotice(base.id, base.name, response.degraded, reason),))

    async def list_item_chunks(self, base_id: Any, item_id: Any) -> list[ChunkRecord]:
        base, item = await self._item_of(base_id, item_id)
        if not base.is_usable:
            return []  # a failed base has no store (its items were never indexed here)
        leaves = await self.items.leaves_under([item.id])
        store = await self.runtime.store(base)
        return await asyncio.to_thread(store.list_chunks, [leaf.id for leaf in leaves])

    async def delete_item_chunk(self, base_id: Any, item_id: Any, chunk_id: Any) -> None:
        base, item = await self._item_of(base_id, item_id)
        require_runnable(base)
        chunk_id = require_id(chunk_id, "chunk_id")
        store = await self.runtime.store(base)
        chunk = await asyncio.to_thread(store.get_chunk, chunk_id)
        if chunk is None:
            raise NotFoundError("Chunk", chunk_id)
        owners = {leaf.id for leaf in await self.items.leaves_under([item.id])}
        if chunk.item_id not in owners:
            raise ValidationError.field("chunk_id", f"chunk {chunk_id} does not belong to item {item.id}")
        async with self.runtime.lock(base.id):
            await asyncio.to_thread(store.delete_chunk, chunk_id)

    async def similar_items(self, base_id: Any, item_id: Any, top_k: Any = None) -> RankResult[KnowledgeItem]:
        """Leaf items of the base ranked by similarity to this item (the Knowledge Engine's
        domain wrapper); degrades to keyword matching instead of failing."""
        from ktui.core.engine import service_embedder
        from ktui.core.search.similar import DEFAULT_SIMILAR_TOP_K, rank_similar_items

        base, item = await self._item_of(base_id, item_id)
        require_runnable(base)
        k = require_top_k(top_k) or DEFAULT_SIMILAR_TOP_K
        leaves = [i for i in await self.items.list_all(base.id) if i.type not in CONTAINER_TYPES]
        store = await self.runtime.store(base)
        texts: dict[str, list[str]] = {}
        for record in await asyncio.to_thread(store.list_chunks, [i.id for i in leaves] + [item.id]):
            texts.setdefault(record.item_id, []).append(record.text)
        if item.type in CONTAINER_TYPES:  # a folder is described by its leaves
            below = {leaf.id for leaf in await self.items.leaves_under([item.id])}
            texts[item.id] = [t for leaf_id in below for t in texts.get(leaf_id, [])]
            leaves = [i for i in leaves if i.id not in below]
        assert base.embedding_model_id is not None  # require_runnable above
        embedder = service_embedder(self.embeddings, base.embedding_model_id, dimensions=base.dimensions)
        return await rank_similar_items(item, leaves, texts, embedder, top_k=k)


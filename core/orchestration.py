"""KnowledgeOrchestrationService: the caller-facing workflow (the nine operations).

It validates input, calls the data services, and drives the runtime in the
orderings callers rely on:

* delete-items / reindex-items: collapse to roots → interrupt roots and wait →
  fresh descendants → interrupt all and wait → delete leaf vectors → delete root
  rows (cascade) | drop container children and prepare again | requeue leaves;
* delete-base: interrupt → delete rows → delete store files (PartialDeletionError
  when files remain);
* restore-base: a new base from the source's settings, root items only.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ktui.core.config import Settings
from ktui.core.data.base_service import KnowledgeBaseService, require_runnable
from ktui.core.data.item_service import KnowledgeItemService
from ktui.core.data.validation import (
    ValidItem,
    require_dimensions,
    require_id,
    require_model_id,
    require_query,
    require_top_k,
    validate_item_input,
    validate_item_inputs,
)
from ktui.core.embeddings import EmbeddingService
from ktui.core.embeddings.profiles import fitted_chunking
from ktui.core.engine import RankResult, service_embedder
from ktui.core.errors import (
    AggregateAcceptanceError,
    InvalidOperationError,
    KnowledgeError,
    NotFoundError,
    PartialDeletionError,
    ProviderUnavailableError,
    StoreError,
    ValidationError,
)
from ktui.core.models import (
    CONTAINER_TYPES,
    DEFAULT_TOP_K,
    BaseStatus,
    ChunkRecord,
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
    NoteItemData,
    SearchFilters,
    SearchMode,
    SearchResponse,
)
from ktui.core.runtime.events import EventBus
from ktui.core.runtime.queue import InterruptReason
from ktui.core.runtime.service import KnowledgeRuntimeService, describe_error
from ktui.core.search import run_search
from ktui.core.search.filters import allowed_items, require_filters
from ktui.core.search.multi import merge_responses
from ktui.core.search.similar import DEFAULT_SIMILAR_TOP_K, rank_similar_items
from ktui.core.store import StoreManager

log = logging.getLogger(__name__)

BASE_DELETE_FAILED = "interrupted: deleting the knowledge base failed"


def _mode(base: KnowledgeBase, mode: Any) -> SearchMode:
    if mode is None:
        return base.search_mode
    try:
        return SearchMode(mode)
    except ValueError:
        raise ValidationError.field("mode", "must be one of hybrid, vector (or default), bm25") from None


class KnowledgeOrchestrationService:
    def __init__(
        self,
        *,
        settings: Settings,
        bases: KnowledgeBaseService,
        items: KnowledgeItemService,
        runtime: KnowledgeRuntimeService,
        stores: StoreManager,
        embeddings: EmbeddingService,
        bus: EventBus,
    ):
        self.settings = settings
        self.bases = bases
        self.items = items
        self.runtime = runtime
        self.state = runtime.state  # every catalogue write goes through it, with its event
        self.stores = stores
        self.embeddings = embeddings
        self.bus = bus

    # --- bases ------------------------------------------------------------

    async def _checked_dimensions(self, model: str, dimensions: Any) -> int:
        """The width a caller asked for, refused when the model answers another one.

        A base whose width differs from its model's vectors could index nothing (every
        item would fail "wrong width"), so this asks the model once. A server that
        cannot be reached now is given the benefit of the doubt: the width may be
        right, and the items will say so if it is not.
        """
        dims = require_dimensions(dimensions)
        try:
            actual = await self.embeddings.detect_dimensions(model)
        except ProviderUnavailableError:
            return dims
        if actual != dims:
            raise ValidationError.field(
                "dimensions", f"{model} answers {actual}-dimensional vectors, not {dims}; "
                f"leave it empty to use {actual}, or pick a model of that width"
            )
        return dims

    async def create_base(
        self, name: Any, embedding_model_id: Any = None, dimensions: Any = None, *, free_name: bool = False,
        group_name: Any = None, **config: Any,
    ) -> KnowledgeBase:
        model = require_model_id(embedding_model_id or self.settings.default_embedding_model)
        self.embeddings.parse_model_id(model)  # unknown provider -> ValidationError naming the field
        self.embeddings.check_rerank_model(config.get("rerank_model_id"))
        if dimensions is None:
            dims = await self.embeddings.detect_dimensions(model)
        else:
            dims = await self._checked_dimensions(model, dimensions)

        async def create_store(base: KnowledgeBase) -> None:
            try:
                await asyncio.to_thread(self.stores.create, base.id, dims)
            except OSError as exc:
                raise StoreError(f"Cannot create the vector store for '{base.name}': {exc}") from exc

        base = await self.state.create_base(
            name=name,
            embedding_model_id=model,
            dimensions=dims,
            config=config,
            before_commit=create_store,
            defaults=self.new_base_defaults(model),
            free_name=free_name,
            group_name=group_name,
        )
        return base

    def new_base_defaults(self, model_id: str) -> dict[str, Any]:
        """What a new base on this model gets unless told otherwise: the configured chunk
        size shrunk to the model's input window, the model's recommended mode and alpha."""
        profile = self.embeddings.profile(model_id)
        size, overlap = fitted_chunking(profile, self.settings.chunk_size, self.settings.chunk_overlap)
        defaults: dict[str, Any] = {"chunk_size": size, "chunk_overlap": overlap, "search_mode": profile.search_mode}
        if profile.hybrid_alpha is not None:
            defaults["hybrid_alpha"] = profile.hybrid_alpha
        return defaults

    async def delete_base(self, base_id: Any) -> None:
        base = await self.bases.get(base_id)
        self.runtime.watcher.unwatch_base(base.id)
        interrupted = await self.runtime.interrupt_base(base.id, InterruptReason.BASE_DELETE)
        try:
            await self.state.delete_base(base.id)
        except Exception:
            if interrupted:
                try:
                    await self.state.set_status_many(list(interrupted), ItemStatus.FAILED, None, BASE_DELETE_FAILED)
                except KnowledgeError:
                    log.exception("could not mark interrupted items failed")
            raise
        self.runtime.forget_base(base.id)
        leftovers = await asyncio.to_thread(self.stores.destroy, base.id)
        if leftovers:
            log.error("knowledge base %s deleted but files remain: %s", base.id, leftovers)
            raise PartialDeletionError(
                f"Knowledge base '{base.name}' was deleted, but some of its files could not be removed: "
                + ", ".join(leftovers),
                leftovers,
            )

    async def restore_base(
        self, source_base_id: Any, embedding_model_id: Any, dimensions: Any, name: Any = None
    ) -> KnowledgeBase:
        source = await self.bases.get(source_base_id)
        model = require_model_id(embedding_model_id)
        self.embeddings.parse_model_id(model)
        dims = await self._checked_dimensions(model, dimensions)
        if (
            source.status == BaseStatus.COMPLETED
            and source.embedding_model_id == model
            and source.dimensions == dims
        ):
            raise InvalidOperationError(
                "Restoring a completed base with the same embedding model and dimensions would only "
                "clone it; choose another model or dimensions"
            )
        roots = await self.items.list_all(source.id, roots_only=True)
        config = {
            "emoji": source.emoji,
            "group_id": source.group_id,
            "rerank_model_id": source.rerank_model_id,
            "chunk_size": source.chunk_size,
            "chunk_overlap": source.chunk_overlap,
            "threshold": source.threshold,
            "document_count": source.document_count,
            "search_mode": source.search_mode.value,
            "hybrid_alpha": source.hybrid_alpha,
            "ocr_enabled": source.ocr_enabled,
            "ocr_languages": source.ocr_languages,
            "ocr_max_pages": source.ocr_max_pages,
        }
        # no name given: the source's, made free ("Notes (2)"); the source keeps its own
        new_base = await self.create_base(name or source.name, model, dims, free_name=name is None, **config)
        failures: dict[str, str] = {}
        accepted: list[ValidItem] = []
        for item in roots:
            try:
                accepted.append(validate_item_input(ItemInput(item.type, payload_of(item)), f"item {item.id}"))
            except KnowledgeError as exc:
                failures[f"{item.type} {item.source}"] = str(exc)
        if not failures and accepted:
            try:
                for start in range(0, len(accepted), 100):
                    await self._accept(new_base, accepted[start : start + 100])
            except KnowledgeError as exc:
                failures["items"] = str(exc)
        if failures:
            try:
                await self.delete_base(new_base.id)
            except Exception:
                log.exception("could not delete the partially restored base %s", new_base.id)
            raise AggregateAcceptanceError(
                f"Restoring '{source.name}' failed: {len(failures)} root item(s) could not be accepted", failures
            )
        return new_base

    # --- items ------------------------------------------------------------

    async def add_items(self, base_id: Any, inputs: Any) -> list[KnowledgeItem]:
        base = require_runnable(await self.bases.get(base_id))
        valid = validate_item_inputs(inputs)
        await self._refuse_duplicates(base, valid)
        return await self._accept(base, valid)

    async def _refuse_duplicates(self, base: KnowledgeBase, valid: Sequence[ValidItem]) -> None:
        """The same file, folder, page or sitemap twice in one base would be indexed twice
        and answer every search twice; reindex is the way to read it again. Notes may
        repeat (two notes can say the same thing on purpose)."""
        existing = {_source_key(i.type, i.data): i for i in await self.items.list_all(base.id, roots_only=True)}
        errors: dict[str, str] = {}
        seen: dict[tuple[ItemType, str], int] = {}
        for n, item in enumerate(valid):
            key = _source_key(item.type, item.data)
            if key is None:
                continue
            field = f"items[{n}].data.{'path' if item.type in (ItemType.FILE, ItemType.DIRECTORY) else 'url'}"
            if key in existing:
                errors[field] = f"already in this base: {key[1]} (reindex it to read it again)"
            elif key in seen:
                errors[field] = f"given twice (also items[{seen[key]}]): {key[1]}"
            else:
                seen[key] = n
        if errors:
            raise ValidationError(errors)

    async def _accept(self, base: KnowledgeBase, valid: Sequence[ValidItem]) -> list[KnowledgeItem]:
        """Create the root rows (one transaction) and queue their work; returns at once."""
        created = await self.state.create_roots(base.id, valid)
        try:
            self.runtime.enqueue_items(created)
        except Exception:
            await self.state.delete(base.id, [i.id for i in created])  # roll back what was accepted
            raise
        for item in created:
            if isinstance(item.data, DirectoryItemData) and item.data.watch:
                self.runtime.watcher.watch(base.id, item.id, item.data.path)
        return created

    async def delete_items(self, base_id: Any, item_ids: Any) -> None:
        base = await self.bases.get(base_id)
        roots = await self.items.collapse_to_roots(base.id, item_ids)
        descendants = await self.runtime.interrupt_tree(roots, InterruptReason.DELETE)
        # Vectors go before rows; a crash in between must not leave the items `completed`
        # with no chunks. Marked unfinished first (published like every write: a
        # subscriber sees `processing`, then the removal); after a crash, recovery
        # indexes them again, as if the delete had never started.
        roots, _ = await self._mark_unfinished(roots)
        leaves = [i.id for i in [*roots, *descendants] if i.type not in CONTAINER_TYPES]
        try:
            await self.runtime.delete_vectors(base, leaves)
        except Exception as exc:
            await self._record_cleanup_failure(roots, exc)
            raise
        for root in roots:
            self.runtime.watcher.unwatch(root.id)
        await self.state.delete(base.id, [r.id for r in roots], [d.id for d in descendants])

    async def _mark_unfinished(self, roots: list[KnowledgeItem]) -> tuple[list[KnowledgeItem], list[KnowledgeItem]]:
        """Mark roots unfinished (containers `processing/preparing`, leaves `processing`),
        only those that still exist: an overlapping delete may have removed some since they
        were looked up. Failing half-way with "not found" would leave the containers marked
        and nothing queued for them — processing while the queue is idle. Returns the roots
        that were marked and the rows that changed."""
        for _ in range(8):
            roots = await self.items.get_many([r.id for r in roots])
            try:
                changed = await self.state.set_status_many(
                    [r.id for r in roots if r.type in CONTAINER_TYPES], ItemStatus.PROCESSING, ItemPhase.PREPARING
                )
                changed += await self.state.set_status_many(
                    [r.id for r in roots if r.type not in CONTAINER_TYPES], ItemStatus.PROCESSING
                )
            except NotFoundError:
                continue  # another call removed one meanwhile: look again
            return roots, changed
        raise InvalidOperationError("the items keep changing under this call; try again")

    async def reindex_items(self, base_id: Any, item_ids: Any, *, force: bool = False) -> list[KnowledgeItem]:
        """Index the selection again. A folder is refreshed incrementally (only new and
        changed files are read; deleted ones removed) unless `force` rebuilds it.
        With `force`, a base whose store file is corrupt or missing gets a fresh store
        and ALL its items are reindexed (the old file is kept as *.corrupt-<stamp>)."""
        base = require_runnable(await self.bases.get(base_id))
        roots = await self.items.collapse_to_roots(base.id, item_ids)
        fresh_store = force and await self.runtime.rebuild_store_if_unreadable(base)
        if fresh_store:
            # the damaged store was set aside: no item of the base has vectors any more
            roots = await self.items.list_all(base.id, roots_only=True)
        await self.runtime.interrupt_tree(roots, InterruptReason.REINDEX)
        rebuilt = [r for r in roots if force or r.type != ItemType.DIRECTORY]
        # Mark what is rebuilt as unfinished BEFORE its vectors and children go: a crash
        # in between must leave it for recovery to redo, not `completed` with nothing in
        # it. A rebuilt container is marked `preparing` so recovery prepares it afresh
        # (processing without a phase would be reconciled from its children).
        rebuilt, _ = await self._mark_unfinished(rebuilt)
        kept = {r.id for r in rebuilt}
        roots = [r for r in roots if r.id in kept or r.type == ItemType.DIRECTORY and not force]
        leaves = [i.id for i in await self.items.leaves_under([r.id for r in rebuilt])]
        try:
            await self.runtime.delete_vectors(base, leaves, skip_damaged=not force)
        except StoreError as exc:
            if force and not fresh_store:
                # damaged inside (it opened, but a write failed): set it aside too, then
                # reindex every root on the fresh store
                await self.runtime.rebuild_store(base, str(exc))
                everything = await self.items.list_all(base.id, roots_only=True)
                return await self.reindex_items(base.id, [r.id for r in everything], force=True)
            await self._record_cleanup_failure(roots, exc)
            raise
        except Exception as exc:
            await self._record_cleanup_failure(roots, exc)
            raise
        for root in rebuilt:
            if root.type in CONTAINER_TYPES:
                await self.state.delete_children(base.id, root.id)
        refreshed = [r.id for r in await self.items.get_many([r.id for r in roots]) if r.id not in kept]
        await self.state.set_status_many(refreshed, ItemStatus.PROCESSING)
        fresh = await self.items.get_many([r.id for r in roots])
        self.runtime.enqueue_items(fresh)
        return fresh

    async def set_watch(self, base_id: Any, item_id: Any, watch: Any) -> KnowledgeItem:
        """Follow (or stop following) a folder item's changes while ktui runs."""
        base, item = await self._item_of(base_id, item_id)
        require_runnable(base)
        if not isinstance(watch, bool):
            raise ValidationError.field("watch", "must be true or false")
        if not isinstance(item.data, DirectoryItemData) or not item.is_root:
            raise ValidationError.field("item_id", "only a top-level directory item can be watched")
        updated = await self.state.update_data(item.id, replace(item.data, watch=watch))
        if watch:
            self.runtime.watcher.watch(base.id, item.id, item.data.path)
            self.runtime.request_refresh(base.id, item.id)
        else:
            self.runtime.watcher.unwatch(item.id)
        return updated

    async def _record_cleanup_failure(self, roots: Sequence[KnowledgeItem], exc: Exception) -> None:
        """Write a cleanup error on the affected items before the caller re-raises it."""
        try:
            await self.state.set_status_many(
                [r.id for r in roots], ItemStatus.FAILED, None, f"Cleanup failed: {describe_error(exc)}"
            )
        except KnowledgeError:
            log.exception("could not record the cleanup failure")

    # --- retrieval --------------------------------------------------------

    async def search(
        self, base_id: Any, query: Any, top_k: Any = None, *, mode: Any = None, filters: Any = None
    ) -> SearchResponse:
        base = require_runnable(await self.bases.get(base_id))
        text = require_query(query)
        k = require_top_k(top_k) or base.top_k
        return await self._search_base(base, text, k, _mode(base, mode), require_filters(filters))

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
            answers.append((base, await self._search_base(base, text, k, _mode(base, mode), flt)))
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
        return await run_search(base, store, self.embeddings, text, top_k=k, mode=mode, item_filter=item_filter)

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

    async def _item_of(self, base_id: Any, item_id: Any) -> tuple[KnowledgeBase, KnowledgeItem]:
        base = await self.bases.get(base_id)
        item = await self.items.get(item_id)
        if item.base_id != base.id:
            raise ValidationError.field("item_id", f"item {item.id} belongs to another knowledge base")
        return base, item


def payload_of(item: KnowledgeItem) -> dict[str, Any]:
    """The add-items payload that re-creates a root item elsewhere (restore, export)."""
    data = item.data
    if isinstance(data, NoteItemData):
        payload: dict[str, Any] = {"content": data.content}
        if data.source_url:
            payload["source_url"] = data.source_url
        return payload
    if isinstance(data, DirectoryItemData):
        return {"path": data.path, "watch": data.watch}
    if isinstance(data, FileItemData):
        return {"path": data.path}
    return {"url": data.url}


def _source_key(item_type: ItemType, data: Any) -> tuple[ItemType, str] | None:
    """What makes two root items the same source (None: items that may repeat)."""
    if item_type in (ItemType.FILE, ItemType.DIRECTORY):
        return item_type, os.path.normpath(data.path)
    if item_type in (ItemType.URL, ItemType.SITEMAP):
        return item_type, data.url
    return None

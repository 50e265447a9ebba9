"""The base operations: create, delete, restore.

delete-base: interrupt → delete rows → delete store files (PartialDeletionError when
files remain); restore-base: a new base from the source's settings, root items only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ktui.core.data.item_validation import validate_item_input
from ktui.core.data.validation import ValidItem, require_dimensions, require_model_id
from ktui.core.embeddings.profiles import fitted_chunking
from ktui.core.errors import (
    AggregateAcceptanceError,
    InvalidOperationError,
    KnowledgeError,
    PartialDeletionError,
    ProviderUnavailableError,
    StoreError,
    ValidationError,
)
from ktui.core.models import (
    BaseStatus,
    ItemInput,
    ItemStatus,
    KnowledgeBase,
)
from ktui.core.orchestration.common import BASE_DELETE_FAILED, payload_of
from ktui.core.orchestration.items import ItemWorkflow
from ktui.core.runtime.queue import InterruptReason

log = logging.getLogger(__name__)



class BaseWorkflow(ItemWorkflow):
    """Bases; restore re-accepts the source's root items through the item workflow."""

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
        group_name: Any = None, import_fingerprint: str | None = None, **config: Any,
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
            import_fingerprint=import_fingerprint,
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
        async with self.runtime.recovery.writing():  # never overlaps a recovery batch
            await self._delete_base(base_id)

    async def _delete_base(self, base_id: Any) -> None:
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
        config: dict[str, Any] = {
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


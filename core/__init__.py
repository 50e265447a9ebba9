"""ktui's core: everything that is not UI. Never imports textual.

This module is the curated public surface (httpx-style): what a script, the CLI,
the TUI and the MCP/HTTP front ends may rely on. Everything else under
`ktui.core.*` is an implementation detail that can move between releases.

Names are resolved lazily (PEP 562): importing `ktui.core.models` or
`ktui.core.errors` must not drag in the ingest stack or every embedding provider,
because a `ktui search` process pays for every module it imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the submodule that defines it
_EXPORTS: dict[str, str] = {
    # the facade and its settings
    "KnowledgeService": "service",
    "Settings": "config",
    "load_settings": "config",
    "default_config_path": "config",  # where the TUI saves a preference (the theme)
    # the Knowledge Engine
    "rank_docs_by_embedding": "engine",
    "cosine_similarity": "engine",
    "RankResult": "engine",
    "RankedMatch": "engine",
    # models
    "ItemType": "models",
    "ItemStatus": "models",
    "ItemPhase": "models",
    "BaseStatus": "models",
    "SearchMode": "models",
    "ScoreKind": "models",
    "KnowledgeGroup": "models",
    "KnowledgeBase": "models",
    "KnowledgeItem": "models",
    "ItemInput": "models",
    "Page": "models",
    "CursorPage": "models",
    "ChunkRecord": "models",
    "KnowledgeSearchResult": "models",
    "SearchResponse": "models",
    "EmbeddingModelInfo": "models",
    "ModelListing": "models",
    "QueueStats": "models",
    "ItemChanged": "models",
    "ItemsAdded": "models",
    "ItemsRemoved": "models",
    "BaseChanged": "models",
    "BaseRemoved": "models",
    "Resync": "models",
    # errors
    "KnowledgeError": "errors",
    "ValidationError": "errors",
    "NotFoundError": "errors",
    "InvalidOperationError": "errors",
    "BaseUnavailableError": "errors",
    "PartialDeletionError": "errors",
    "AggregateAcceptanceError": "errors",
    "ConfigError": "errors",
    "SchemaVersionError": "errors",
    "StoreError": "errors",
    "IngestError": "errors",
    "ProviderError": "errors",
    "ProviderUnavailableError": "errors",
    "ModelNotFoundError": "errors",
    "EmbeddingShapeError": "errors",
    "TaskInterrupted": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ktui.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ktui.core.{module}"), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ktui.core.config import Settings, load_settings
    from ktui.core.engine import RankedMatch, RankResult, cosine_similarity, rank_docs_by_embedding
    from ktui.core.errors import (
        AggregateAcceptanceError,
        BaseUnavailableError,
        ConfigError,
        EmbeddingShapeError,
        IngestError,
        InvalidOperationError,
        KnowledgeError,
        ModelNotFoundError,
        NotFoundError,
        PartialDeletionError,
        ProviderError,
        ProviderUnavailableError,
        SchemaVersionError,
        StoreError,
        TaskInterrupted,
        ValidationError,
    )
    from ktui.core.models import (
        BaseChanged,
        BaseRemoved,
        BaseStatus,
        ChunkRecord,
        CursorPage,
        EmbeddingModelInfo,
        ItemChanged,
        ItemInput,
        ItemPhase,
        ItemsAdded,
        ItemsRemoved,
        ItemStatus,
        ItemType,
        KnowledgeBase,
        KnowledgeGroup,
        KnowledgeItem,
        KnowledgeSearchResult,
        ModelListing,
        Page,
        QueueStats,
        Resync,
        ScoreKind,
        SearchMode,
        SearchResponse,
    )
    from ktui.core.service import KnowledgeService

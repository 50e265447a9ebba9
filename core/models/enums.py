"""The enums every layer shares: item types, statuses and phases, base statuses, search modes, score kinds."""

from __future__ import annotations

from enum import StrEnum


class ItemType(StrEnum):
    FILE = "file"
    URL = "url"
    NOTE = "note"
    DIRECTORY = "directory"
    SITEMAP = "sitemap"

    @property
    def is_container(self) -> bool:
        return self in CONTAINER_TYPES

    @property
    def is_leaf(self) -> bool:
        return self not in CONTAINER_TYPES


CONTAINER_TYPES = frozenset({ItemType.DIRECTORY, ItemType.SITEMAP})
LEAF_TYPES = frozenset({ItemType.FILE, ItemType.URL, ItemType.NOTE})


class ItemStatus(StrEnum):
    IDLE = "idle"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in (ItemStatus.COMPLETED, ItemStatus.FAILED)


class ItemPhase(StrEnum):
    PREPARING = "preparing"  # containers only
    READING = "reading"  # leaves only
    EMBEDDING = "embedding"  # leaves only


class BaseStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"


class KnowledgeBaseErrorCode(StrEnum):
    MISSING_EMBEDDING_MODEL = "missing_embedding_model"


class SearchMode(StrEnum):
    DEFAULT = "default"  # cosine similarity over vectors
    BM25 = "bm25"  # FTS5 full-text ranking
    HYBRID = "hybrid"  # reciprocal-rank fusion of both

    @classmethod
    def _missing_(cls, value: object) -> SearchMode | None:
        """`vector` is the name users see (TUI, CLI, docs); `default` stays the stored value."""
        return cls.DEFAULT if isinstance(value, str) and value == "vector" else None


class ScoreKind(StrEnum):
    """What a result's `score` measures, so callers never compare apples to pears."""

    COSINE = "cosine"
    BM25 = "bm25"
    RRF = "rrf"  # reciprocal-rank fusion (kept for callers that fuse with it)
    FUSED = "fused"  # hybrid: convex combination of the normalised vector and bm25 scores (0..1)
    RERANK = "rerank"
    KEYWORD = "keyword"

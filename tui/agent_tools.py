"""What `ktui mcp` and `ktui serve` do for other programs, over the facade only.

Both front ends answer with the same JSON shapes as `ktui --json` (docs/cli.md),
so a script can move between the CLI, MCP and HTTP without relearning them.
Every function takes the open `KnowledgeService` and plain arguments, lets the
facade validate them (a bad value raises `ValidationError` naming the field),
and returns JSON-ready dicts.

Searching several bases goes through the facade's `search_bases`: raw scores of
different bases (and kinds) cannot be compared, so results are merged by their
0..1 relevance (core/search/multi.py), each naming its base and its rank there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ktui.core.errors import BaseUnavailableError, ValidationError
from ktui.core.models import ANY_GROUP, ROOT, ItemInput, KnowledgeBase
from ktui.core.service import KnowledgeService
from ktui.tui.cli_render import base_json, chunk_json, item_json, result_json
from ktui.tui.paging import all_bases

ITEM_TYPES = ("file", "url", "note", "directory", "sitemap")
ADDABLE_TYPES = ("note", "url", "file", "directory")
FILTER_FETCH_FACTOR = 5  # results fetched per wanted result when a filter may drop some
MAX_TOP_K = 1000
DEFAULT_MULTI_TOP_K = 10


async def list_bases(ks: KnowledgeService) -> dict[str, Any]:
    counts = await ks.item_counts()
    return {"bases": [base_json(b, counts.get(b.id, 0)) for b in await all_bases(ks)]}


async def get_base(ks: KnowledgeService, base_ref: Any) -> dict[str, Any]:
    base = await ks.resolve_base(base_ref)
    counts = await ks.item_counts()
    return base_json(base, counts.get(base.id, 0))


def page_json(page: Any, convert: Any) -> dict[str, Any]:
    return {
        "items": [convert(x) for x in page.items],
        "total": page.total,
        "page": page.page,
        "limit": page.limit,
        "pages": page.pages,
    }


async def list_items(
    ks: KnowledgeService,
    base_ref: Any,
    *,
    parent_id: str | None = None,
    type: str | None = None,
    everything: bool = False,
    page: Any = 1,
    limit: Any = 50,
) -> dict[str, Any]:
    base = await ks.resolve_base(base_ref)
    group = ANY_GROUP if everything else (parent_id if parent_id is not None else ROOT)
    listing = await ks.list_items(base.id, type=type, group_id=group, page=page, limit=limit)
    return {"base_id": base.id, **page_json(listing, item_json)}


async def get_item(ks: KnowledgeService, item_id: Any) -> dict[str, Any]:
    return item_json(await ks.get_item(item_id))


async def read_chunk(
    ks: KnowledgeService, base_ref: Any, item_id: Any, chunk_id: Any, neighbours: Any = 1
) -> dict[str, Any]:
    """A chunk with up to `neighbours` chunks of the same item on each side."""
    if isinstance(neighbours, bool) or not isinstance(neighbours, int) or not 0 <= neighbours <= 20:
        raise ValidationError.field("neighbours", "must be an integer from 0 to 20")
    base = await ks.resolve_base(base_ref)
    chunks = await ks.list_item_chunks(base.id, item_id)
    target = next((c for c in chunks if c.id == chunk_id), None)
    if target is None:
        raise ValidationError.field("chunk_id", f"item {item_id} has no chunk {chunk_id}")
    same = sorted((c for c in chunks if c.item_id == target.item_id), key=lambda c: c.chunk_index)
    at = next(i for i, c in enumerate(same) if c.id == target.id)
    return {
        "base_id": base.id,
        "item_id": target.item_id,
        "chunk": chunk_json(target),
        "before": [chunk_json(c) for c in same[max(0, at - neighbours):at]],
        "after": [chunk_json(c) for c in same[at + 1:at + 1 + neighbours]],
        "chunk_count": len(same),
    }


async def list_chunks(ks: KnowledgeService, base_ref: Any, item_id: Any) -> dict[str, Any]:
    base = await ks.resolve_base(base_ref)
    chunks = await ks.list_item_chunks(base.id, item_id)
    return {"base_id": base.id, "item_id": item_id, "chunks": [chunk_json(c) for c in chunks]}


def _check_top_k(top_k: Any) -> int | None:
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValidationError.field("top_k", f"must be an integer from 1 to {MAX_TOP_K}")
    return top_k


def _check_types(types: Any) -> set[str] | None:
    if types is None:
        return None
    if not isinstance(types, list | tuple) or not all(isinstance(t, str) for t in types):
        raise ValidationError.field("types", "must be a list of item types")
    unknown = sorted(set(types) - set(ITEM_TYPES))
    if unknown:
        raise ValidationError.field("types", f"unknown item type(s) {unknown}; use {', '.join(ITEM_TYPES)}")
    return set(types)


async def search(
    ks: KnowledgeService,
    query: Any,
    bases: Sequence[Any] | None = None,
    *,
    mode: Any = None,
    top_k: Any = None,
    types: Any = None,
    source_contains: Any = None,
    source_prefix: Any = None,
    modified_after: Any = None,
) -> dict[str, Any]:
    """Search one base, several, or (no `bases`) every usable base, through the facade's
    `search_bases`: results are merged by their 0..1 relevance, so they compare across bases.

    `types`, `source_prefix` and `modified_after` are the facade's filters (applied
    before ranking); `source_contains` keeps results whose source (path or URL)
    contains the text, so the bases are asked for more results when it is set.
    """
    k = _check_top_k(top_k)
    wanted_types = _check_types(types)
    if source_contains is not None and (not isinstance(source_contains, str) or not source_contains.strip()):
        raise ValidationError.field("source_contains", "must be non-empty text")
    if bases is not None and (isinstance(bases, str) or not isinstance(bases, Sequence)):
        raise ValidationError.field("bases", "must be a list of base ids or names")
    explicit = bases is not None and len(bases) > 0
    if explicit:
        targets = []
        for ref in bases:  # type: ignore[union-attr]
            base = await ks.resolve_base(ref)
            if base.id not in {t.id for t in targets}:
                targets.append(base)
    else:
        targets = await all_bases(ks)
    notices: list[dict[str, Any]] = []
    usable: list[KnowledgeBase] = []
    for base in targets:
        if base.is_usable:
            usable.append(base)
        elif explicit:
            raise BaseUnavailableError(base.id, base.name)
        else:
            notices.append({"base_id": base.id, "base_name": base.name,
                            "reason": "skipped: the base has no usable embedding model (restore it)"})
    filters: dict[str, Any] = {}
    if wanted_types:
        filters["item_types"] = sorted(wanted_types)
    if source_prefix is not None:
        filters["source_prefix"] = source_prefix
    if modified_after is not None:
        filters["modified_after"] = modified_after
    want = k or (usable[0].top_k if len(usable) == 1 else DEFAULT_MULTI_TOP_K)
    fetch = min(MAX_TOP_K, want * FILTER_FETCH_FACTOR) if source_contains is not None else want
    names = {b.id: b.name for b in usable}
    rows: list[dict[str, Any]] = []
    # None when nothing is usable: the facade still validates the query and finds nothing
    response = await ks.search_bases([b.id for b in usable] or None, query, fetch, mode=mode, filters=filters or None)
    notices += [{"base_id": n.base_id, "base_name": n.base_name, "degraded": n.degraded, "reason": n.reason}
                for n in response.notices]
    for result in response.results:
        row = result_json(result)
        if source_contains is not None and source_contains not in str(row.get("source") or ""):
            continue
        row["heading"] = result.metadata.get("heading")
        row["base_name"] = names.get(result.base_id or "", result.base_id)
        row["base_rank"] = result.base_rank
        rows.append(row)
    rows = rows[:want]
    for position, row in enumerate(rows, 1):
        row["rank"] = position
    return {
        "query": query,
        "mode": mode or (_plain_mode(usable[0]) if usable else None),
        "bases": [b.id for b in usable],
        "degraded": any(n.get("degraded") for n in notices),
        "notices": notices,
        "summary": _summary(len(rows), notices),
        "results": rows,
    }


def _plain_mode(base: KnowledgeBase) -> str:
    mode = base.search_mode
    return str(getattr(mode, "value", mode))


def _summary(count: int, notices: list[dict[str, Any]]) -> str:
    text = f"{count} result(s)"
    degraded = [n["base_name"] for n in notices if n.get("degraded")]
    if degraded:
        text += (f"; DEGRADED: keyword-only (bm25) results from {', '.join(degraded)} because the query "
                 "could not be embedded")
    return text


def item_inputs(specs: Any) -> list[ItemInput]:
    """`[{"type": "note", "content": ...}, {"type": "file", "path": ...}, ...]` as facade inputs."""
    if not isinstance(specs, list) or not specs:
        raise ValidationError.field("items", "must be a non-empty list of items")
    out = []
    for n, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise ValidationError.field(f"items[{n}]", "must be an object with a type")
        kind = spec.get("type")
        if kind not in ADDABLE_TYPES:
            raise ValidationError.field(f"items[{n}].type", f"must be one of {', '.join(ADDABLE_TYPES)}")
        data = {key: value for key, value in spec.items() if key != "type" and value is not None}
        out.append(ItemInput(kind, data))
    return out


async def add_items(ks: KnowledgeService, base_ref: Any, specs: Any) -> dict[str, Any]:
    base = await ks.resolve_base(base_ref)
    items = await ks.add_items(base.id, item_inputs(specs))
    return {"base_id": base.id, "items": [item_json(i) for i in items]}


async def reindex(ks: KnowledgeService, base_ref: Any, item_ids: Any, *, force: bool = False) -> dict[str, Any]:
    base = await ks.resolve_base(base_ref)
    items = await ks.reindex_items(base.id, item_ids, force=force)
    return {"base_id": base.id, "items": [item_json(i) for i in items]}

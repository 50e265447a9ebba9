"""How the CLI prints things: stable JSON shapes (docs/cli.md) and short text for people.

Kept free of core.service imports so that building the shapes costs nothing at
start-up; only `core.models` (plain dataclasses) is needed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from enum import Enum
from typing import Any, TextIO

from ktui.core.models import (
    ChunkRecord,
    DirectoryItemData,
    EmbeddingModelInfo,
    FileItemData,
    KnowledgeBase,
    KnowledgeGroup,
    KnowledgeItem,
    KnowledgeSearchResult,
    SearchResponse,
)
from ktui.tui.cli_text import cell_width, pad, printable
from ktui.tui.cli_window import window_row
from ktui.tui.ocr_summary import ocr_rows
from ktui.tui.skip_summary import skipped_summary


class UsageError(Exception):
    """A command-line mistake argparse cannot see (exit code 2)."""


# --- JSON shapes ----------------------------------------------------------


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def base_json(base: KnowledgeBase, item_count: int | None = None) -> dict[str, Any]:
    out = {
        "id": base.id,
        "name": base.name,
        "emoji": base.emoji,
        "group_id": base.group_id,
        "status": _plain(base.status),
        "error": _plain(base.error),
        "embedding_model_id": base.embedding_model_id,
        "dimensions": base.dimensions,
        "rerank_model_id": base.rerank_model_id,
        "chunk_size": base.chunk_size,
        "chunk_overlap": base.chunk_overlap,
        "threshold": base.threshold,
        "document_count": base.document_count,
        "top_k": base.top_k,
        "search_mode": _plain(base.search_mode),
        "hybrid_alpha": base.hybrid_alpha,
        "ocr_enabled": base.ocr_enabled,
        "ocr_languages": base.ocr_languages,
        "ocr_max_pages": base.ocr_max_pages,
        "created_at": base.created_at,
        "updated_at": base.updated_at,
        "needs_rebuild": base.needs_rebuild,
        "store_problem": base.store_problem,
    }
    if item_count is not None:
        out["item_count"] = item_count
    return out


def item_json(item: KnowledgeItem) -> dict[str, Any]:
    data = asdict(item.data)
    return {
        "id": item.id,
        "base_id": item.base_id,
        "group_id": item.group_id,
        "type": _plain(item.type),
        "name": item.display_name,
        "source": item.source,
        "status": _plain(item.status),
        "phase": _plain(item.phase),
        "error": item.error,
        "data": data,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
    }


SCORE_DIGITS = 6
"""A result's raw `score` is shown to 6 decimals in every JSON shape (CLI, HTTP, MCP):
enough to keep the scores of neighbouring ranks apart on every scale (reciprocal-rank
fusion steps by ~1.5e-5 at rank 200; cosines, bm25, reranker logits by more), while
`relevance` keeps its 4 (core/search/relevance.py). The order is the ranking's, never
re-derived from the rounded figure."""


def result_json(result: KnowledgeSearchResult) -> dict[str, Any]:
    return {
        "rank": result.rank,
        "score": round(result.score, SCORE_DIGITS),
        "score_kind": _plain(result.score_kind),
        "relevance": result.relevance,
        "base_id": result.base_id,
        "item_id": result.item_id,
        "chunk_id": result.chunk_id,
        "source": result.metadata.get("source"),
        "text": result.page_content,
        "metadata": result.metadata,
    }


def search_json(query: str, mode: str, response: SearchResponse,
                base_names: dict[str, str] | None = None) -> dict[str, Any]:
    results = []
    for r in response.results:
        row = result_json(r)
        if base_names is not None:
            row["base_name"] = base_names.get(r.base_id or "", r.base_id)
        results.append(row)
    return {
        "query": query,
        "mode": mode,
        "degraded": response.degraded,
        "reason": response.reason,
        "results": results,
    }


def chunk_json(chunk: ChunkRecord) -> dict[str, Any]:
    return {
        "id": chunk.id,
        "item_id": chunk.item_id,
        "chunk_index": chunk.chunk_index,
        "text": chunk.text,
        "metadata": chunk.metadata,
    }


def model_json(model: EmbeddingModelInfo) -> dict[str, Any]:
    return {"id": model.id, "provider": model.provider, "model": model.model, "dimensions": model.dimensions,
            "note": model.note}


def group_json(group: KnowledgeGroup) -> dict[str, Any]:
    return {"id": group.id, "name": group.name, "created_at": group.created_at, "updated_at": group.updated_at}


def json_text(value: Any, indent: int | None = None) -> str:
    """JSON as UTF-8 text: non-ASCII letters stay readable, but a document holding a lone
    surrogate (a non-UTF-8 file name, through os.fsdecode) is written all-ASCII, so its
    \\udcXX escapes keep it exact and it stays valid UTF-8 for jq and every JSON parser
    (stdout's surrogateescape would otherwise write the raw, invalid byte)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, default=_plain)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, indent=indent, default=_plain)
    return text


def dump(value: Any, out: TextIO | None = None) -> None:
    """One JSON document, pretty enough to read, stable keys order (as built)."""
    out = out or sys.stdout
    out.write(json_text(value, indent=2) + "\n")


def dump_line(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(json_text(value) + "\n")


# --- text for people ------------------------------------------------------


def table(rows: Sequence[Sequence[str]], headers: Sequence[str], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if not rows:
        return
    rows = [[printable(str(c)) for c in row] for row in rows]  # widths of what is shown
    widths = [max(cell_width(c) for c in col) for col in zip(headers, *rows, strict=False)]  # display columns
    widths[-1] = 0  # the last column is never padded
    for row in [headers, *rows]:
        out.write("  ".join(pad(c, w) for c, w in zip(row, widths, strict=False)).rstrip() + "\n")


def base_status_label(base: KnowledgeBase) -> str:
    if base.is_usable and base.needs_rebuild:
        return f"needs rebuild: {base.store_problem} (run `ktui reindex {base.id} --all`)"
    if base.is_usable:
        return "ready"
    return f"failed: {_plain(base.error)} (restore it)"


def ocr_label(base: KnowledgeBase) -> str:
    """The base's own OCR choices; what it leaves to the settings' [ocr] table says so."""
    enabled = "settings" if base.ocr_enabled is None else ("on" if base.ocr_enabled else "off")
    languages = base.ocr_languages or "settings"
    pages = "settings" if base.ocr_max_pages is None else str(base.ocr_max_pages)
    return f"{enabled}; languages {languages}; pages per file {pages}"


def base_lines(base: KnowledgeBase, item_count: int | None, group_name: str | None) -> list[str]:
    rows = [
        ("name", f"{base.emoji} {base.name}"),
        ("id", base.id),
        ("status", base_status_label(base)),
        ("group", group_name or "-"),
        ("model", base.embedding_model_id or "- (missing; restore with a model available here)"),
        ("dimensions", _dash(base.dimensions)),
        ("rerank model", _dash(base.rerank_model_id)),
        ("chunk size", f"{base.chunk_size} tokens, overlap {base.chunk_overlap}"),
        ("search mode", _plain(base.search_mode) + (f" (alpha {base.hybrid_alpha})" if base.hybrid_alpha is not None else "")),
        ("top-K", str(base.top_k)),
        ("threshold", _dash(base.threshold)),
        ("OCR", ocr_label(base)),
        ("items", _dash(item_count)),
        ("created", base.created_at),
        ("updated", base.updated_at),
    ]
    width = max(len(k) for k, _ in rows)
    return [f"{k.ljust(width)}  {printable(v)}" for k, v in rows]


def item_status_label(item: KnowledgeItem) -> str:
    status = _plain(item.status)
    if item.phase is not None:
        return f"{status}/{_plain(item.phase)}"
    return status


def item_lines(item: KnowledgeItem, chunk_count: int | None, *, window_advice: str | None = None) -> list[str]:
    """`ktui item`: one item's facts, label and value a line, including how OCR read it and
    whether its chunks were longer than the model's window (`window_advice`: what to change)."""
    data = item.data
    rows = [
        ("name", item.display_name),
        ("id", item.id),
        ("type", _plain(item.type)),
        ("source", item.source),
        ("status", item_status_label(item)),
    ]
    if item.error:
        rows.append(("error", own_error(item)))  # the source row names the path
    if item.type.is_leaf:
        rows.append(("chunks", _dash(chunk_count)))
        window = window_row(item, window_advice)
        if window is not None:
            rows.append(window)
    if isinstance(data, FileItemData):
        if data.size is not None:
            rows.append(("size", f"{data.size:,} bytes"))
        rows.extend((label.lower() if label == "OCR" else label, value) for label, value in ocr_rows(data.ocr))
    if isinstance(data, DirectoryItemData):
        skipped = skipped_summary(data.skipped)
        if skipped:
            rows.append(("skipped", skipped))
    rows += [("added", item.created_at), ("updated", item.updated_at)]
    width = max(len(k) for k, _ in rows)
    return [f"{k.ljust(width)}  {printable(str(v))}" for k, v in rows]


def names_itself(item: KnowledgeItem) -> bool:
    """A failure worth a line of its own: not a folder failed only because a file in it did
    (that file has its line)."""
    return item.type.is_leaf or not item.error or "child" not in item.error


def own_error(item: KnowledgeItem) -> str:
    """The item's error without the path it ends with when the line names that path already
    (`Not a text file (binary content): /a/b.md`)."""
    error = item.error or ""
    for name in (item.source, getattr(item.data, "path", None)):
        if isinstance(name, str) and name and error.endswith(f": {name}"):
            return error[: -len(name) - 2]
    return error


def item_rows(items: Iterable[KnowledgeItem], depth: dict[str, int] | None = None) -> list[list[str]]:
    rows = []
    for item in items:
        indent = "  " * (depth or {}).get(item.id, 0)
        status = item_status_label(item)
        if item.error:
            status += f": {own_error(item)}"  # the row names the item already
        rows.append([item.id, _plain(item.type), indent + item.display_name, status])
    return rows


def snippet(text: str, width: int = 160) -> str:
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)

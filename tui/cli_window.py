"""Chunks past the model's input window: the lines `ktui item` and `--wait` print.

A model cuts every input at its window, silently: what is past it never reaches the
vector. Indexing records it per leaf (`window_overflow` in the item's data, see
`ktui.core.models.WindowOverflow`); these helpers tell the user, in the item's
details (`ktui item`) and once at the end of an `add` / `reindex --wait`, with what
to change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ktui.core.models import KnowledgeBase, KnowledgeItem, WindowOverflow


def overflow_of(item: KnowledgeItem) -> WindowOverflow | None:
    return WindowOverflow.from_dict(getattr(item.data, "window_overflow", None))


def window_advice(ks: Any, base: KnowledgeBase) -> str:
    size = ks.model_profile(base.embedding_model_id).fitting_chunk_size() if base.embedding_model_id else None
    if size is None:
        return "use a smaller chunk size"
    return f"use a chunk size of at most {size} (`ktui base update {base.id} --chunk-size {size}`, then reindex)"


def window_lines(ks: Any, bases: Iterable[KnowledgeBase], over: list[KnowledgeItem]) -> list[str]:
    """One warning line per base in which some of `over` (items with chunks past the window) are."""
    lines = []
    for base in bases:
        reports = [r for r in (overflow_of(i) for i in over if i.base_id == base.id) if r is not None]
        if not reports:
            continue
        longest = max(r.longest for r in reports)
        worst = max(r.cut_share for r in reports)
        lines.append(
            f"warning: {base.name}: {len(reports)} item(s) have chunks longer than the {reports[0].window_tokens}-token "
            f"input window of {base.embedding_model_id} (up to {longest} tokens; up to {worst:.0%} of an item's "
            f"text is cut off before embedding): {window_advice(ks, base)}; `ktui item {base.id} ITEM` shows each"
        )
    return lines


def window_json(items: Iterable[KnowledgeItem]) -> list[dict[str, Any]]:
    return [{"id": i.id, "source": i.source, **r.as_dict()} for i in items if (r := overflow_of(i)) is not None]


def window_overflow_json(item: KnowledgeItem) -> dict[str, Any] | None:
    report = overflow_of(item)
    return report.as_dict() if report is not None else None


def window_row(item: KnowledgeItem, advice: str | None) -> tuple[str, str] | None:
    """`ktui item`'s window line, or None when the item's chunks fit."""
    report = overflow_of(item)
    if report is None:
        return None
    return ("window", f"warning: {report.describe()}" + (f"; {advice}" if advice else ""))

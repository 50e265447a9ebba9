"""An item's OCR summary (`FileItemData.ocr`, see docs/data-model.md) as label/value rows.

Shared by the CLI's `ktui item` and the TUI's item detail, so both say the same
thing: which pages were recognised, with what mean word confidence, which pages
deserve a look (low confidence, no text found) and which needed OCR and did not
get it, with why. Values are plain strings; each front end cleans them for its
own output (they hold an engine's version string and an error message).
"""

from __future__ import annotations

from typing import Any

from ktui.core.models import OCR_LOW_CONFIDENCE

LOW_CONFIDENCE_NOTE = f"below {OCR_LOW_CONFIDENCE:g} %: worth checking"


def _pages(compact: str, count: int | None = None) -> str:
    """`"1-3, 7"` -> `"pages 1-3, 7"`; one page reads `"page 7"`."""
    single = compact.isdigit()
    text = f"page {compact}" if single else f"pages {compact}"
    if count is not None and not single:
        text += f" ({count:,} pages)"
    return text


def ocr_rows(ocr: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Rows for an item's details; none when OCR played no part in reading it."""
    if not ocr:
        return []
    rows: list[tuple[str, str]] = []
    pages = str(ocr.get("pages") or "")
    if pages:
        text = _pages(pages, ocr.get("page_count"))
        confidence = ocr.get("confidence")
        if confidence is not None:
            text += f", mean confidence {confidence:g} %"
        if ocr.get("engine"):
            text += f" ({ocr['engine']})"
        rows.append(("OCR", text))
    else:
        rows.append(("OCR", "no page was recognised"))
    if ocr.get("low_confidence_pages"):
        rows.append(("  low confidence", f"{_pages(ocr['low_confidence_pages'])} ({LOW_CONFIDENCE_NOTE})"))
    if ocr.get("blank_pages"):
        rows.append(("  no text found", _pages(ocr["blank_pages"])))
    if ocr.get("cached_pages"):
        cached = int(ocr["cached_pages"])
        rows.append(("  from the cache", f"{cached:,} page{'s' if cached != 1 else ''} (not recognised again)"))
    if ocr.get("skipped_pages"):
        reason = ocr.get("skipped_reason") or "unknown"
        rows.append(("  not recognised", f"{_pages(ocr['skipped_pages'])}: {reason}"))
    return rows

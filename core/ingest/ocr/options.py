"""What one file's OCR may do, and what it did.

`OcrOptions` travels with a read request to the parse worker (it is picklable):
the settings' `[ocr]` table merged with the base's own OCR settings. Its limits
(pages, pixels, time per page) are OCR's share of the parser limits: each one
that is passed fails the file with a message naming the setting.

`OcrReport` is filled while a file is read and summarised into the item's
payload (`FileItemData.ocr`), so the item says which pages were recognised and
how confident the recogniser was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktui.core.models import OCR_LOW_CONFIDENCE

if TYPE_CHECKING:
    from ktui.core.config import Settings
    from ktui.core.models import KnowledgeBase

CACHE_FILENAME = "ocr-cache.sqlite"
LOW_CONFIDENCE = OCR_LOW_CONFIDENCE  # a page whose words average below this is worth checking by eye

ProgressFn = Callable[[int, int], None]
"""progress(pages done, pages to do) while pages are recognised."""


@dataclass(frozen=True, slots=True)
class OcrOptions:
    enabled: bool = True
    languages: tuple[str, ...] = ("eng",)
    max_pages: int = 500  # pages recognised per file; more fails the file
    max_pixels: int = 90_000_000  # per image or rendered page (Pillow's own default guard is 89.5 MP)
    page_timeout: float = 120.0  # seconds Tesseract may spend on one page
    render_dpi: int = 300  # PDF pages without images are rendered at this resolution
    command: str = "tesseract"
    cache_path: str | None = None  # SQLite file of recognised pages (None: no cache)
    cache_entries: int = 200_000

    def signature(self, engine_version: str) -> str:
        """What, besides the page's bytes, decides the recognised text (part of the cache key)."""
        return f"{engine_version}|{'+'.join(self.languages)}|{self.render_dpi}|v1"


def ocr_options(settings: Settings, base: KnowledgeBase | None = None) -> OcrOptions:
    """The OCR a file of `base` gets: the settings' `[ocr]` table, with the base's own
    choices (on/off, languages, page limit) winning where it has made them."""
    ocr = settings.ocr
    enabled, languages, max_pages = ocr.enabled, ocr.languages, ocr.max_pages
    if base is not None:
        if base.ocr_enabled is not None:
            enabled = base.ocr_enabled
        if base.ocr_languages:
            languages = tuple(base.ocr_languages.split("+"))
        if base.ocr_max_pages is not None:
            max_pages = base.ocr_max_pages
    return OcrOptions(
        enabled=enabled,
        languages=languages,
        max_pages=max_pages,
        max_pixels=ocr.max_pixels,
        page_timeout=ocr.page_timeout,
        render_dpi=ocr.render_dpi,
        command=ocr.tesseract,
        cache_path=str(Path(settings.data_dir) / CACHE_FILENAME) if ocr.cache_entries > 0 else None,
        cache_entries=ocr.cache_entries,
    )


@dataclass(slots=True)
class OcrReport:
    """Pages recognised in one file (1-based page or frame numbers)."""

    engine: str | None = None
    pages: list[int] = field(default_factory=list)
    confidences: list[float] = field(default_factory=list)
    cached: int = 0  # pages answered from the cache
    skipped: list[int] = field(default_factory=list)  # pages that needed OCR and did not get it
    skipped_reason: str | None = None
    low: list[int] = field(default_factory=list)  # recognised with a mean confidence under LOW_CONFIDENCE
    blank: list[int] = field(default_factory=list)  # recognised, and no word was found

    def add(self, page: int, confidence: float | None) -> None:
        """One recognised page and its words' mean confidence (None: no word found)."""
        self.pages.append(page)
        if confidence is None:
            self.blank.append(page)
            return
        self.confidences.append(confidence)
        if confidence < LOW_CONFIDENCE:
            self.low.append(page)

    def summary(self) -> dict[str, Any] | None:
        """The item payload's `ocr` field, or None when OCR played no part. Page lists are
        compact ranges ("1-3, 7"): short for a long scan whose pages run in order."""
        if not self.pages and not self.skipped:
            return None
        out: dict[str, Any] = {"pages": compact_pages(self.pages), "page_count": len(self.pages)}
        if self.engine:
            out["engine"] = self.engine
        if self.confidences:
            out["confidence"] = round(sum(self.confidences) / len(self.confidences), 1)
        if self.low:
            out["low_confidence_pages"] = compact_pages(self.low)
        if self.blank:
            out["blank_pages"] = compact_pages(self.blank)
        if self.cached:
            out["cached_pages"] = self.cached
        if self.skipped:
            out["skipped_pages"] = compact_pages(self.skipped)
            out["skipped_reason"] = self.skipped_reason
        return out


def compact_pages(pages: list[int]) -> str:
    """[1, 2, 3, 7, 9, 10] -> "1-3, 7, 9-10": short for a 500-page scan, readable in a detail view."""
    parts: list[str] = []
    ordered = sorted(set(pages))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)

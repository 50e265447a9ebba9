"""Recognise a file's pages, one at a time, under OCR's limits.

Pages come as (number, loader) pairs: a loader decodes or renders its page only
when the cache does not already hold it, so at most one page image is in memory
and an unchanged scan is neither rendered nor recognised again. The page limit
is checked before any work; the time limit is Tesseract's per page; the pixel
limit is checked by the loaders (formats/image.py, formats/pdf_render.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from PIL import Image, ImageOps

from ktui.core.errors import IngestError
from ktui.core.ingest.ocr.cache import open_cache, page_key
from ktui.core.ingest.ocr.engine import OcrUnavailable, PageText, check_languages, find_tesseract, recognise
from ktui.core.ingest.ocr.options import OcrOptions, OcrReport, ProgressFn

PageLoader = Callable[[], Image.Image]
SMALL_IMAGE_PIXELS = 2_000_000  # screenshots and photos of a receipt: upscaled 2x before recognition


@dataclass
class OcrContext:
    """One file's OCR: its options, the report it fills, and where progress goes."""

    options: OcrOptions
    content_sha256: str | None = None  # the file's hash: the cache key's content part
    progress: ProgressFn | None = None
    report: OcrReport = field(default_factory=OcrReport)


def greyscale_page(image: Image.Image) -> Image.Image:
    """The page as Tesseract reads it best: upright, greyscale, transparency on white, and
    small images (screenshots) doubled so that their text is tall enough."""
    image = ImageOps.exif_transpose(image)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    grey = image.convert("L")
    if grey.width * grey.height < SMALL_IMAGE_PIXELS:
        grey = grey.resize((grey.width * 2, grey.height * 2), Image.Resampling.LANCZOS)
    return grey


def check_page_count(count: int, options: OcrOptions, label: str) -> None:
    if count > options.max_pages:
        raise IngestError(
            f"{count:,} pages need OCR; the limit is {options.max_pages:,} pages per file (ocr.max_pages): {label}"
        )


def recognise_pages(ctx: OcrContext, pages: Sequence[tuple[int, PageLoader]], label: str) -> dict[int, PageText]:
    """Text of each page, by page number. Raises OcrUnavailable / IngestError naming `label`."""
    options = ctx.options
    check_page_count(len(pages), options, label)
    if not pages:
        return {}
    try:
        engine = find_tesseract(options.command)
        check_languages(engine, options.languages)
    except OcrUnavailable as exc:
        raise OcrUnavailable(f"{exc}: {label}") from None
    ctx.report.engine = engine.version
    signature = options.signature(engine.version)
    cache = open_cache(options.cache_path, options.cache_entries) if ctx.content_sha256 else None
    out: dict[int, PageText] = {}
    total = len(pages)
    if ctx.progress is not None:
        ctx.progress(0, total)
    for done, (number, load) in enumerate(pages, start=1):
        key = page_key(signature, ctx.content_sha256, number) if cache is not None and ctx.content_sha256 else None
        found = cache.get(key) if cache is not None and key is not None else None
        if found is not None:
            ctx.report.cached += 1
        else:
            image = greyscale_page(load())
            try:
                found = recognise(engine, image, options.languages, options.page_timeout)
            except OcrUnavailable as exc:
                raise OcrUnavailable(f"{exc}: {label}") from None
            except IngestError as exc:
                raise IngestError(f"{exc}: {label} (page {number})") from None
            finally:
                image.close()
            if cache is not None and key is not None:
                cache.put(key, found)
        out[number] = found
        ctx.report.add(number, found.confidence)
        if ctx.progress is not None:
            ctx.progress(done, total)
    return out

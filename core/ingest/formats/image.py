"""Images (PNG, JPEG, TIFF, WebP, BMP, GIF) through Pillow and OCR: one document per page.

A multi-page TIFF gives one document per frame (`page`, 1-based); a GIF or an
animated WebP is read from its first frame only (later frames of an animation
repeat it). Every frame's size is checked against `ocr.max_pixels` from the
header, before anything is decoded, and Pillow's decompression-bomb guard is set
to the same limit, so a 30,000 x 30,000 image fails at once naming the limit
instead of allocating gigabytes.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from PIL import Image, UnidentifiedImageError

from ktui.core.errors import IngestError
from ktui.core.ingest.formats.text import PLAIN, no_text_error
from ktui.core.ingest.ocr.options import OcrOptions
from ktui.core.ingest.ocr.pages import OcrContext, PageLoader, recognise_pages
from ktui.core.models import Document

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".jpe", ".tif", ".tiff", ".webp", ".bmp", ".gif"})
FORMATS = ("PNG", "JPEG", "TIFF", "WEBP", "BMP", "DIB", "GIF")  # what the extensions promise, nothing else
SINGLE_FRAME = frozenset({"GIF", "WEBP", "MPO", "PNG", "JPEG"})  # animations: the first frame is the picture


def pixel_limit_error(width: int, height: int, options: OcrOptions, label: str, what: str = "Image") -> IngestError:
    return IngestError(
        f"{what} is too large to read ({width:,} x {height:,} = {width * height / 1e6:,.0f} MP; "
        f"limit {options.max_pixels / 1e6:,.0f} MP, ocr.max_pixels): {label}"
    )


@contextmanager
def pixel_guard(options: OcrOptions) -> Iterator[None]:
    """Pillow's decompression-bomb check at our limit, as an error rather than a warning."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = options.max_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def parse_image(data: bytes, source: str, label: str, ctx: OcrContext | None) -> list[Document]:
    options = ctx.options if ctx is not None else OcrOptions(enabled=False)
    if ctx is None or not options.enabled:
        raise IngestError(f"Images are read by OCR, which is off for this base (ocr = false): {label}")
    Image.init()  # every plugin registered: `formats=` names some that preinit() leaves out
    formats = [f for f in FORMATS if f in Image.OPEN]
    with pixel_guard(options):
        try:
            image = Image.open(io.BytesIO(data), formats=formats)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            image = None
        except UnidentifiedImageError:
            raise IngestError(f"Cannot read the image file (damaged or not an image): {label}") from None
        if image is None:
            raise pixel_limit_error(*_header_size(data), options, label) from None
        with image:
            frames = 1 if image.format in SINGLE_FRAME else max(1, getattr(image, "n_frames", 1))
            loaders = [(n, _frame_loader(image, n - 1, options, label)) for n in range(1, frames + 1)]
            found = recognise_pages(ctx, loaders, label)
    docs = [
        Document(page.text, {"source": source, "page": number, "content_type": PLAIN,
                             "ocr": True, "ocr_confidence": page.confidence})
        for number, page in sorted(found.items())
        if page.text.strip()
    ]
    if not docs:
        raise no_text_error(label, hint="OCR found no text")
    if frames == 1:
        docs = [Document(d.text, {k: v for k, v in d.metadata.items() if k != "page"}) for d in docs]
    return docs


def _header_size(data: bytes) -> tuple[int, int]:
    """Width and height from the header alone (the guard is lifted: nothing is decoded)."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        with Image.open(io.BytesIO(data)) as probe:
            return probe.size
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def _frame_loader(image: Image.Image, index: int, options: OcrOptions, label: str) -> PageLoader:
    def load() -> Image.Image:
        try:
            image.seek(index)
        except EOFError:
            raise IngestError(f"Cannot read the image file (frame {index + 1} is missing): {label}") from None
        width, height = image.size
        if width * height > options.max_pixels:
            raise pixel_limit_error(width, height, options, label)
        try:
            image.load()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise pixel_limit_error(width, height, options, label) from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise IngestError(f"Cannot read the image file (damaged or truncated): {label}: {exc}") from None
        return image.copy()

    return load

"""Rendering PDF pages for OCR, through pypdfium2 (PDFium, the renderer Chrome uses).

A page is rendered at the resolution of the scan it holds (its largest image's
pixels per inch, kept within 150-400 dpi), or at `ocr.render_dpi` when it has no
image (text drawn as outlines), and never to more than `ocr.max_pixels`. An
image inside the page larger than `ocr.max_pixels` fails the file before it is
decoded. A page whose text layer is only short (a page number, a scanner's
stamp) is recognised only when it holds a sizeable image.
"""

from __future__ import annotations

import math

from PIL import Image

from ktui.core.errors import IngestError
from ktui.core.ingest.formats.image import pixel_limit_error
from ktui.core.ingest.ocr.engine import PageText
from ktui.core.ingest.ocr.pages import OcrContext, PageLoader, recognise_pages

MIN_DPI, MAX_DPI = 150, 400
SIZEABLE_IMAGE_PIXELS = 100_000  # a short text layer over an image this big: the image is the page


def recognise_pdf_pages(data: bytes, needs_ocr: dict[int, str], ctx: OcrContext, label: str) -> dict[int, PageText]:
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise IngestError(f"Cannot render PDF pages for OCR (damaged PDF): {label}: {exc}") from None
    try:
        loaders: list[tuple[int, PageLoader]] = []
        for number, quality in sorted(needs_ocr.items()):
            if number > len(document):
                continue
            page = document[number - 1]
            width_in, height_in = page.get_width() / 72, page.get_height() / 72
            largest = 0
            dpi = 0.0
            for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=4):
                px_w, px_h = obj.get_px_size()
                if px_w * px_h > ctx.options.max_pixels:
                    raise pixel_limit_error(px_w, px_h, ctx.options, label, what=f"An image on page {number}")
                if px_w * px_h > largest:
                    largest = px_w * px_h
                    left, _bottom, right, _top = obj.get_bounds()
                    shown_in = max((right - left) / 72, 1e-3)
                    dpi = px_w / shown_in
            if quality == "short" and largest < SIZEABLE_IMAGE_PIXELS:
                continue  # real, if short, text and no scan behind it
            dpi = min(max(dpi, MIN_DPI), MAX_DPI) if largest else float(ctx.options.render_dpi)
            pixels = width_in * dpi * height_in * dpi
            if pixels > ctx.options.max_pixels:
                dpi *= math.sqrt(ctx.options.max_pixels / pixels)
            loaders.append((number, _renderer(page, dpi)))
        return recognise_pages(ctx, loaders, label)
    finally:
        document.close()


def _renderer(page, dpi: float) -> PageLoader:  # type: ignore[no-untyped-def]
    def render() -> Image.Image:
        bitmap = page.render(scale=dpi / 72, grayscale=True)
        try:
            image: Image.Image = bitmap.to_pil().copy()
            return image
        finally:
            bitmap.close()

    return render

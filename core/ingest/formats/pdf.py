"""PDF through pypdf: one document per page, `page` 1-based; scanned pages through OCR.

An encrypted PDF that opens with the empty user password (permissions-only
"protection", common in published PDFs) is read; one that needs a password
fails with a clear message. A page whose text layer is missing, or is clearly
junk (mostly symbols, replacement or private-use characters: a broken font
mapping), is rendered and recognised (formats/pdf_render.py), so a mixed PDF
keeps its real text and only its scanned pages go through OCR. A page whose
text cannot be extracted at all is skipped. With OCR off or not installed the
pages that needed it are left out (and recorded as skipped); a PDF left with no
text fails with "no text content" saying why.
"""

from __future__ import annotations

import io
import logging

from ktui.core.errors import IngestError
from ktui.core.ingest.formats.text import PLAIN, no_text_error
from ktui.core.ingest.ocr.engine import OcrUnavailable, PageText
from ktui.core.ingest.ocr.pages import OcrContext, check_page_count
from ktui.core.models import Document

logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable PDFs are common

MIN_REAL_CHARACTERS = 16  # fewer letters and digits than this: a page number, a scanner's stamp


def text_quality(text: str) -> str:
    """"empty", "junk", "short" or "good": whether a page's text layer can be trusted."""
    visible = [c for c in text if not c.isspace()]
    if not visible:
        return "empty"
    alnum = sum(1 for c in visible if c.isalnum())
    bad = sum(1 for c in visible if c == "\ufffd" or "\ue000" <= c <= "\uf8ff" or ord(c) < 0x20)
    if bad > 0.1 * len(visible) or (len(visible) >= 8 and alnum < 0.5 * len(visible)):
        return "junk"
    return "short" if alnum < MIN_REAL_CHARACTERS else "good"


def parse_pdf(data: bytes, source: str, label: str, ctx: OcrContext | None = None) -> list[Document]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    if not data.startswith(b"%PDF") and b"%PDF" not in data[:1024]:
        raise IngestError(f"Not a PDF file: {label}")
    texts: dict[int, str] = {}
    needs_ocr: dict[int, str] = {}  # page -> its text quality
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except DependencyError:
                raise IngestError(f"PDF is encrypted with a method this install cannot read: {label}") from None
            if not opened:
                raise IngestError(f"PDF is encrypted (password protected): {label}")
        for number, page in enumerate(reader.pages, start=1):
            try:
                text = page.extract_text() or ""
            except (FileNotDecryptedError, DependencyError):
                raise IngestError(f"PDF is encrypted (password protected): {label}") from None
            except Exception:  # noqa: BLE001, S112 - one broken page must not lose the others
                continue
            text = text.replace("\x00", "")
            quality = text_quality(text)
            if quality != "good":
                needs_ocr[number] = quality
            if quality in ("good", "short"):
                texts[number] = text
    except PdfReadError as exc:
        raise IngestError(f"Cannot read PDF (damaged or not a PDF): {label}: {exc}") from None
    recognised = _recognise(data, needs_ocr, texts, ctx, label)
    docs: list[Document] = []
    for number in sorted(set(texts) | set(recognised)):
        read = recognised.get(number)
        if read is not None and len(read.text.strip()) > len(texts.get(number, "").strip()):
            docs.append(Document(read.text, {"source": source, "page": number, "content_type": PLAIN,
                                             "ocr": True, "ocr_confidence": read.confidence}))
        elif texts.get(number, "").strip():
            docs.append(Document(texts[number], {"source": source, "page": number, "content_type": PLAIN}))
    if not docs:
        report = ctx.report if ctx is not None else None
        raise no_text_error(label, hint=report.skipped_reason if report and report.skipped else
                            ("OCR found no text" if recognised else None))
    return docs


def _recognise(data: bytes, needs_ocr: dict[int, str], texts: dict[int, str], ctx: OcrContext | None,
               label: str) -> dict[int, PageText]:
    if not needs_ocr:
        return {}
    definite = [n for n, q in needs_ocr.items() if q != "short"]
    if ctx is None or not ctx.options.enabled:
        if ctx is not None and definite:
            ctx.report.skipped = definite
            ctx.report.skipped_reason = "scanned pages; OCR is off for this base"
        return {}
    check_page_count(len(definite), ctx.options, label)
    from ktui.core.ingest.formats.pdf_render import recognise_pdf_pages

    try:
        return recognise_pdf_pages(data, needs_ocr, ctx, label)
    except OcrUnavailable as exc:
        if not any(t.strip() for t in texts.values()):
            raise
        ctx.report.skipped = definite
        ctx.report.skipped_reason = str(exc).rsplit(": ", 1)[0]
        return {}

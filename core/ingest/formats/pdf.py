"""PDF through pypdf: one document per page, `page` 1-based.

An encrypted PDF that opens with the empty user password (permissions-only
"protection", common in published PDFs) is read; one that needs a password
fails with a clear message. Pages whose text cannot be extracted are skipped; a
PDF with no text at all (a scan) fails with "no text content".
"""

from __future__ import annotations

import io
import logging

from ktui.core.errors import IngestError
from ktui.core.ingest.formats.text import PLAIN, no_text_error
from ktui.core.models import Document

logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable PDFs are common


def parse_pdf(data: bytes, source: str, label: str) -> list[Document]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    if not data.startswith(b"%PDF") and b"%PDF" not in data[:1024]:
        raise IngestError(f"Not a PDF file: {label}")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except DependencyError:
                raise IngestError(f"PDF is encrypted with a method this install cannot read: {label}") from None
            if not opened:
                raise IngestError(f"PDF is encrypted (password protected): {label}")
        pages = reader.pages
        docs: list[Document] = []
        for number, page in enumerate(pages, start=1):
            try:
                text = page.extract_text() or ""
            except (FileNotDecryptedError, DependencyError):
                raise IngestError(f"PDF is encrypted (password protected): {label}") from None
            except Exception:  # noqa: BLE001, S112 - one broken page must not lose the others
                continue
            text = text.replace("\x00", "")
            if text.strip():
                docs.append(Document(text, {"source": source, "page": number, "content_type": PLAIN}))
    except PdfReadError as exc:
        raise IngestError(f"Cannot read PDF (damaged or not a PDF): {label}: {exc}") from None
    if not docs:
        raise no_text_error(label)
    return docs

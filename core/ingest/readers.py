"""Read one leaf item (file, url, note) into documents.

Dispatch is by file extension for files and by Content-Type (then the URL's
extension, then a sniff of the first bytes) for URLs. Parsing runs in a worker
thread (`asyncio.to_thread`) because the event loop is shared with the TUI.
Every failure becomes an `IngestError` whose message names the file or URL;
exceptions a parsing library raises on a damaged file are wrapped the same way,
so a bad file fails its item and never crashes the runtime.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import cast
from urllib.parse import unquote, urlsplit

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest.fetch import FetchedResource, Fetcher
from ktui.core.ingest.formats import epub, html, image, office, pdf, text
from ktui.core.ingest.kinds import MARKDOWN_EXTENSIONS, TEXT_EXTENSIONS, TEXT_FILENAMES
from ktui.core.ingest.ocr.pages import OcrContext
from ktui.core.models import Document, FileItemData, ItemType, NoteItemData, UrlItemData

Parser = Callable[[bytes, str, str], list[Document]]
OcrParser = Callable[[bytes, str, str, OcrContext | None], list[Document]]

HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
CSV_EXTENSIONS = frozenset({".csv", ".tsv"})


def _csv(data: bytes, source: str, label: str) -> list[Document]:
    return text.parse_csv(data, source, label, delimiter="\t" if label.lower().endswith(".tsv") else None)


_PARSERS: dict[str, Parser] = {
    **{ext: text.parse_plain for ext in TEXT_EXTENSIONS},
    **{ext: text.parse_markdown for ext in MARKDOWN_EXTENSIONS},
    **{ext: html.parse_html for ext in HTML_EXTENSIONS},
    **{ext: _csv for ext in CSV_EXTENSIONS},
    ".json": text.parse_json,
    ".ipynb": text.parse_notebook,
    ".pdf": cast(Parser, pdf.parse_pdf),  # called through _with_ocr
    ".docx": office.parse_docx,
    ".pptx": office.parse_pptx,
    ".xlsx": office.parse_xlsx,
    ".xlsm": office.parse_xlsx,
    ".epub": epub.parse_epub,
    **{ext: cast(Parser, image.parse_image) for ext in image.IMAGE_EXTENSIONS},  # called through _with_ocr
}
OCR_PARSERS: frozenset[object] = frozenset({pdf.parse_pdf, image.parse_image})
"""Parsers that take the file's OCR context as a fourth argument."""

SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_PARSERS)
"""Lower-case extensions, with the dot, that a reader supports."""

_KIND_NAMES: dict[object, str] = {
    pdf.parse_pdf: "PDF",
    office.parse_docx: "DOCX",
    office.parse_pptx: "PPTX",
    office.parse_xlsx: "XLSX",
    epub.parse_epub: "EPUB",
    html.parse_html: "HTML",
    image.parse_image: "image",
}


def _extension(name: str) -> str:
    return os.path.splitext(name.lower())[1]


def _parser_for_name(name: str) -> Parser | None:
    parser = _PARSERS.get(_extension(name))
    if parser is None and name.lower() in TEXT_FILENAMES:
        return text.parse_plain
    return parser


def is_supported_file(path: str | Path) -> bool:
    """True when a reader exists for this file name (by extension or well-known name)."""
    return _parser_for_name(Path(path).name) is not None


def _with_ocr(parser: OcrParser, ocr: OcrContext | None) -> Parser:
    def call(data: bytes, source: str, label: str) -> list[Document]:
        return parser(data, source, label, ocr)

    return call


def is_image_file(path: str | Path) -> bool:
    """True for the image formats that OCR reads (PNG, JPEG, TIFF, WebP, BMP, GIF)."""
    return _extension(Path(path).name) in image.IMAGE_EXTENSIONS


def _run_parser(parser: Parser, data: bytes, source: str, label: str, kind: str | None = None) -> list[Document]:
    """Call a parser, turning any library exception into an IngestError naming the source."""
    try:
        return parser(data, source, label)
    except IngestError:
        raise
    except MemoryError:
        raise IngestError(f"Not enough memory to read {label}") from None
    except RecursionError:
        raise IngestError(f"Cannot read {label}: structure nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - damaged files make libraries raise anything
        what = "the page" if "://" in label else f"{kind or _KIND_NAMES.get(parser, 'the')} file"
        detail = str(exc).strip() or type(exc).__name__
        raise IngestError(f"Cannot read {what} (damaged or wrong format): {label}: {detail}") from None


# --- files ----------------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def read_file_bytes(path: str, max_bytes: int) -> bytes:
    """Read a whole file, refusing one over `max_bytes`, with a clear error per failure.

    Opened non-blocking and checked with fstat before any read: a file that was
    swapped for a FIFO after the item was added would otherwise block the parse
    worker in open() until its timeout (or for ever, were ktui gone).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb", closefd=True) as handle:
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode):
                raise IsADirectoryError(path)
            if not stat.S_ISREG(status.st_mode):
                raise IngestError(f"Not a regular file (a pipe, socket or device): {path}")
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
            size = status.st_size
            if size > max_bytes:
                raise IngestError(f"File is too large ({_mb(size)}; limit {_mb(max_bytes)}): {path}")
            # Read what fstat announced plus one byte: asking for max_bytes would make
            # Python allocate the whole limit (50 MB) for every small file.
            data = handle.read(size + 1 if size else max_bytes + 1)
    except FileNotFoundError:
        raise IngestError(f"File not found: {path}") from None
    except IsADirectoryError:
        raise IngestError(f"Not a file (a directory): {path}") from None
    except PermissionError:
        raise IngestError(f"File cannot be read (permission denied): {path}") from None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise IngestError(f"File not found: {path}") from None
        raise IngestError(f"File cannot be read ({exc.strerror or exc}): {path}") from None
    if len(data) > max_bytes:  # it grew while we read it (or fstat could not tell)
        raise IngestError(f"File is too large (over the {_mb(max_bytes)} limit): {path}")
    return data


def read_file_sync(path: str, settings: IngestSettings, source: str | None = None) -> list[Document]:
    """Read and parse one file (blocking; `read_leaf` runs this in a thread)."""
    if _parser_for_name(os.path.basename(path)) is None:
        raise IngestError(f"Unsupported file type: {path}")
    return parse_bytes(read_file_bytes(path, settings.max_file_bytes), path, source or path)


def parse_bytes(data: bytes, name: str, source: str, ocr: OcrContext | None = None) -> list[Document]:
    """Parse file content by its name's extension (blocking); `name` labels errors.

    `ocr` lets PDFs and images recognise pages without text; without it, scanned PDF
    pages are left out and images fail saying that OCR is off.
    """
    parser = _parser_for_name(os.path.basename(name))
    if parser is None:
        raise IngestError(f"Unsupported file type: {name}")
    if not data:
        raise IngestError(f"File is empty: {name}")
    if parser in OCR_PARSERS:
        return _run_parser(_with_ocr(cast(OcrParser, parser), ocr), data, source, name, kind=_KIND_NAMES.get(parser))
    return _run_parser(parser, data, source, name)


# --- urls -----------------------------------------------------------------

_CONTENT_TYPES: dict[str, Parser] = {
    "text/html": html.parse_html,
    "application/xhtml+xml": html.parse_html,
    "application/pdf": pdf.parse_pdf,
    "application/x-pdf": pdf.parse_pdf,
    "text/markdown": text.parse_markdown,
    "text/x-markdown": text.parse_markdown,
    "application/json": text.parse_json,
    "text/csv": text.parse_csv,
    "text/tab-separated-values": _csv,
    "application/epub+zip": epub.parse_epub,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": office.parse_docx,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": office.parse_pptx,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": office.parse_xlsx,
}
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/download"})


def _parser_for_response(resource: FetchedResource) -> Parser | None:
    ctype = resource.content_type
    parser = _CONTENT_TYPES.get(ctype)
    if parser is not None:
        return parser
    if ctype.endswith("+json"):
        return text.parse_json
    if ctype.startswith("text/") or ctype in ("application/xml", "application/javascript"):
        by_name = _parser_for_name(PurePosixPath(unquote(urlsplit(resource.url).path)).name)
        return by_name if by_name in (text.parse_plain, text.parse_markdown, text.parse_json, _csv) else text.parse_plain
    if ctype in _GENERIC_TYPES:
        by_name = _parser_for_name(PurePosixPath(unquote(urlsplit(resource.url).path)).name)
        if by_name is not None and cast(object, by_name) is not image.parse_image:  # OCR reads files only
            return by_name
        head = resource.body[:1024].lstrip().lower()
        if head.startswith(b"%pdf"):
            return pdf.parse_pdf
        if head.startswith((b"<!doctype html", b"<html")):
            return html.parse_html
        return text.parse_plain if ctype == "" else None
    return None


def parse_fetched(resource: FetchedResource, source: str) -> list[Document]:
    """Parse a fetched body by its content type (blocking)."""
    parser = _parser_for_response(resource)
    label = resource.url
    if parser is None:
        raise IngestError(f"Unsupported content type {resource.content_type or '(none)'}: {label}")
    if not resource.body:
        raise IngestError(f"Empty response body: {label}")
    def html_with_base(d: bytes, s: str, lb: str) -> list[Document]:
        return html.parse_html(d, s, lb, resource.charset, resource.url)

    def text_with_charset(d: bytes, s: str, lb: str) -> list[Document]:
        return parser(d, s, lb, resource.charset)  # type: ignore[call-arg]

    call: Parser
    if parser is html.parse_html:
        call = html_with_base
    elif parser in (text.parse_plain, text.parse_markdown, text.parse_json):
        call = text_with_charset
    else:
        call = parser
    docs = _run_parser(call, resource.body, source, label)
    if resource.url != source:
        docs = [Document(d.text, {**d.metadata, "url": resource.url}) for d in docs]
    return docs


# --- notes ----------------------------------------------------------------


def read_note(data: NoteItemData) -> list[Document]:
    """A note is Markdown text the user typed: one document."""
    content = data.content if isinstance(data.content, str) else ""
    if not content.strip():
        raise IngestError("Note has no text content")
    meta: dict[str, object] = {"source": data.source, "content_type": text.MARKDOWN}
    if data.source_url:
        meta["source_url"] = data.source_url
    return [Document(content.replace("\r\n", "\n"), meta)]


# --- the entry point ------------------------------------------------------


async def read_leaf(
    item_type: ItemType,
    data: FileItemData | UrlItemData | NoteItemData,
    settings: IngestSettings,
    fetcher: Fetcher,
) -> list[Document]:
    """Read a leaf item into documents (metadata: source, plus page/sheet/slide/... where known)."""
    kind = ItemType(item_type)
    if kind == ItemType.FILE and isinstance(data, FileItemData):
        return await asyncio.to_thread(read_file_sync, data.path, settings, data.source or data.path)
    if kind == ItemType.URL and isinstance(data, UrlItemData):
        resource = await fetcher.fetch(data.url)
        return await asyncio.to_thread(parse_fetched, resource, data.source or data.url)
    if kind == ItemType.NOTE and isinstance(data, NoteItemData):
        return read_note(data)
    raise IngestError(f"Cannot read a {kind.value} item with {type(data).__name__} data")

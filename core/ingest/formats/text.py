"""Plain text, Markdown, source code, JSON and CSV.

Encodings are detected, not assumed: a byte-order mark wins, then a charset the
server declared, then strict UTF-8 (the common case, and the fast path: no
detector runs), then charset-normalizer. Content with NUL bytes or many control
characters is refused as binary, so a PNG renamed to .txt fails clearly instead
of indexing garbage.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re

from ktui.core.errors import IngestError
from ktui.core.models import Document

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_SAMPLE_CHARS = 8192
_MAX_CONTROL_RATIO = 0.02

PLAIN = "text/plain"
MARKDOWN = "text/markdown"


def binary_error(label: str) -> IngestError:
    return IngestError(f"Not a text file (binary content): {label}")


def no_text_error(label: str, hint: str | None = None) -> IngestError:
    """`hint` says why, when it is known (for one, "OCR found no text")."""
    return IngestError(f"File has no text content ({hint}): {label}" if hint else f"File has no text content: {label}")


_CONTROL_BYTES = frozenset([*range(0x09), *range(0x0E, 0x20), 0x7F])
_KEEP_CONTROL = bytes(b for b in range(256) if b not in _CONTROL_BYTES)


def _utf8_looks_binary(data: bytes) -> bool:
    """Control-character ratio straight on UTF-8 bytes (control bytes never occur inside
    multi-byte sequences), with bytes.translate: a C loop instead of a regex."""
    sample = data[: _SAMPLE_CHARS * 2]
    return len(sample.translate(None, _KEEP_CONTROL)) > _MAX_CONTROL_RATIO * len(sample)


def _looks_binary(text: str) -> bool:
    sample = text[:_SAMPLE_CHARS]
    if not sample:
        return False
    return len(_CONTROL_RE.findall(sample)) > _MAX_CONTROL_RATIO * len(sample)


def _normalise_newlines(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _detect_encoding(data: bytes) -> str | None:
    """charset-normalizer's pick, except that Windows-1252 wins near-ties.

    On short Western-European text the detector often ranks a Baltic or Mac code
    page first by a hair, which garbles every accent; Windows-1252 is by far the
    most common legacy encoding (and what browsers assume for Latin-1), so it is
    preferred when its "chaos" score is within 0.2 of the best candidate's.
    """
    from charset_normalizer import from_bytes

    results = from_bytes(data)
    best = results.best()
    if best is None or best.encoding is None:
        return None
    for match in results:
        if match.chaos <= best.chaos + 0.2 and "cp1252" in match.could_be_from_charset:
            return "cp1252"
    return best.encoding


def decode_text(data: bytes, label: str, declared: str | None = None) -> str:
    """Decode `data` as text or raise IngestError (empty / binary / undecodable)."""
    if not data:
        raise IngestError(f"File is empty: {label}")
    text: str | None = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                raise binary_error(label) from None
            break
    if text is None and declared:
        try:
            text = data.decode(declared)
        except (LookupError, UnicodeDecodeError):
            text = None
    if text is None:
        try:
            utf8 = data.decode("utf-8")
            if _utf8_looks_binary(data):
                raise binary_error(label)
            return _normalise_newlines(utf8)
        except UnicodeDecodeError:
            if b"\x00" in data[:_SAMPLE_CHARS]:
                raise binary_error(label) from None
            detected = _detect_encoding(data)
            if detected is None:
                raise binary_error(label) from None
            text = data.decode(detected, errors="replace")
    if _looks_binary(text):
        raise binary_error(label)
    return _normalise_newlines(text.lstrip("\ufeff"))


def _one(text: str, source: str, label: str, content_type: str, **meta: object) -> list[Document]:
    if not text.strip():
        raise no_text_error(label)
    return [Document(text, {"source": source, "content_type": content_type, **meta})]


def parse_plain(data: bytes, source: str, label: str, charset: str | None = None) -> list[Document]:
    return _one(decode_text(data, label, charset), source, label, PLAIN)


def parse_markdown(data: bytes, source: str, label: str, charset: str | None = None) -> list[Document]:
    return _one(decode_text(data, label, charset), source, label, MARKDOWN)


def parse_json(data: bytes, source: str, label: str, charset: str | None = None) -> list[Document]:
    """Validated, then re-indented so that minified JSON still splits at lines."""
    text = decode_text(data, label, charset)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(f"Invalid JSON in {label}: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise IngestError(f"Invalid JSON in {label}: nested too deeply") from None
    if value in (None, "", [], {}):
        raise no_text_error(label)
    pretty = json.dumps(value, indent=1, ensure_ascii=False)
    return _one(pretty, source, label, PLAIN)


def parse_csv(data: bytes, source: str, label: str, charset: str | None = None,
              delimiter: str | None = None) -> list[Document]:
    """One line per row, cells joined by " | " (the header row stays the first line)."""
    text = decode_text(data, label, charset)
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:16384], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    lines = []
    try:
        for row in csv.reader(io.StringIO(text), delimiter=delimiter):
            cells = [c.strip() for c in row]
            while cells and not cells[-1]:
                cells.pop()
            if cells:
                lines.append(" | ".join(cells))
    except csv.Error:
        lines = [text]  # malformed quoting: keep the raw text rather than lose it
    return _one("\n".join(lines), source, label, PLAIN)


def parse_notebook(data: bytes, source: str, label: str, charset: str | None = None) -> list[Document]:
    """Jupyter notebooks: Markdown cells as they are, code cells fenced; outputs are dropped
    (they are mostly base64 images and noisy reprs that would drown the text)."""
    text = decode_text(data, label, charset)
    try:
        notebook = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise IngestError(f"Invalid notebook (not JSON): {label}") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise IngestError(f"Invalid notebook (no cells): {label}")
    language = str(((notebook.get("metadata") or {}).get("language_info") or {}).get("name") or "")
    parts: list[str] = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        src = cell.get("source", "")
        body = "".join(src) if isinstance(src, list) else str(src)
        if not body.strip():
            continue
        if cell.get("cell_type") == "code":
            parts.append(f"```{language}\n{body.rstrip()}\n```")
        else:
            parts.append(body.strip())
    return _one(_normalise_newlines("\n\n".join(parts)), source, label, MARKDOWN)


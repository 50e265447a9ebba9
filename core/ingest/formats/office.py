"""Office Open XML: DOCX (python-docx), PPTX (python-pptx), XLSX (openpyxl).

DOCX headings (the "Heading N" and "Title" styles) become Markdown `#` lines so
Word documents get heading-aware chunks like Markdown files. PPTX gives one
document per slide (`slide`, 1-based, plus its title and speaker notes); XLSX one
per sheet (`sheet` = its name), one line per row with cells joined by " | ".
"""

from __future__ import annotations

import io
import re
from datetime import date, datetime, time
from typing import Any

from ktui.core.errors import IngestError
from ktui.core.ingest.formats.text import MARKDOWN, PLAIN, no_text_error
from ktui.core.models import Document

_HEADING_STYLE_RE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_BLANK_RUN_RE = re.compile(r"\n{3,}")


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    return " ".join(str(value).split())


MAX_CELLS = 5_000_000  # spreadsheet cells walked per file (empty ones count: they cost the same)
MAX_BLOCKS = 1_000_000  # paragraphs and tables per document


def _row(cells: list[str]) -> str:
    out: list[str] = []
    for cell in cells:
        if not out or cell != out[-1]:  # merged cells repeat their text
            out.append(cell)
    while out and not out[-1]:
        out.pop()
    return " | ".join(out)


# --- DOCX -----------------------------------------------------------------


def parse_docx(data: bytes, source: str, label: str) -> list[Document]:
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    lines: list[str] = []
    for count, block in enumerate(document.iter_inner_content()):
        if count >= MAX_BLOCKS:
            raise IngestError(f"{label} passes the limit of {MAX_BLOCKS:,} paragraphs and tables")
        if isinstance(block, Table):
            for row in block.rows:
                line = _row([_cell_text(c.text) for c in row.cells])
                if line:
                    lines.append(line)
            lines.append("")
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        m = _HEADING_STYLE_RE.match(style)
        if m:
            lines.extend(["", "#" * min(int(m.group(1)), 6) + " " + " ".join(text.split()), ""])
        elif style.lower() == "title":
            lines.extend(["", "# " + " ".join(text.split()), ""])
        elif style.lower().startswith("list"):
            lines.append("- " + text)
        else:
            lines.extend([text, ""])
    body = _BLANK_RUN_RE.sub("\n\n", "\n".join(lines)).strip()
    if not body:
        raise no_text_error(label)
    return [Document(body, {"source": source, "content_type": MARKDOWN})]


# --- PPTX -----------------------------------------------------------------


def _shape_lines(shape: Any) -> list[str]:
    from pptx.shapes.group import GroupShape

    lines: list[str] = []
    if isinstance(shape, GroupShape):
        for inner in shape.shapes:
            lines.extend(_shape_lines(inner))
        return lines
    if getattr(shape, "has_text_frame", False):
        lines.extend(t for t in (p.text.strip() for p in shape.text_frame.paragraphs) if t)
    if getattr(shape, "has_table", False):
        for row in shape.table.rows:
            line = _row([_cell_text(c.text) for c in row.cells])
            if line:
                lines.append(line)
    return lines


def parse_pptx(data: bytes, source: str, label: str) -> list[Document]:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    docs: list[Document] = []
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text.split()) if title_shape is not None and title_shape.has_text_frame else ""
        lines: list[str] = []
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            lines.extend(_shape_lines(shape))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                lines.extend(["", "Notes: " + notes])
        body = "\n".join(([title, ""] if title else []) + lines).strip()
        if body:
            meta: dict[str, Any] = {"source": source, "slide": number, "content_type": PLAIN}
            if title:
                meta["title"] = title
            docs.append(Document(body, meta))
    if not docs:
        raise no_text_error(label)
    return docs


# --- XLSX -----------------------------------------------------------------


def parse_xlsx(data: bytes, source: str, label: str) -> list[Document]:
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        docs: list[Document] = []
        cells = 0
        for sheet in workbook.worksheets:
            # the dimension a file *claims* (A1:XFD1048576 in a 5 KB file) pads every row to
            # its width; count the cells that are really there instead
            sheet.reset_dimensions()
            lines = []
            for values in sheet.iter_rows(values_only=True):
                cells += len(values)
                if cells > MAX_CELLS:
                    # a 5 KB file can claim the whole 1M x 16k grid: refuse instead of walking it
                    raise IngestError(f"{label} passes the limit of {MAX_CELLS:,} spreadsheet cells "
                                      f"(in sheet '{sheet.title}')")
                line = _row([_cell_text(v) for v in values])
                if line.strip(" |"):
                    lines.append(line)
            if lines:
                docs.append(Document("\n".join(lines), {"source": source, "sheet": sheet.title,
                                                         "content_type": PLAIN}))
    finally:
        workbook.close()
    if not docs:
        raise no_text_error(label)
    return docs

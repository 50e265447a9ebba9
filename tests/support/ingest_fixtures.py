"""Generators of real files for ingestion tests and benchmarks (written by the real libraries)."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = ["knowledge", "base", "search", "vector", "embedding", "chunk", "token", "sentence", "paragraph", "heading", "index", "query", "terminal", "keyboard", "sqlite", "python", "library", "reader", "format", "document", "page", "sheet", "slide", "result", "rank", "the", "a", "of", "and", "to", "in", "is", "it", "for", "with", "on", "as", "by", "this", "that", "from", "at", "be", "are", "was"]


def make_docx(path: Path, *, heading: str = "Chapter One", body: str = "Alpha paragraph text.") -> Path:
    import docx

    document = docx.Document()
    document.add_heading("Report Title", level=0)
    document.add_heading(heading, level=1)
    document.add_paragraph(body)
    document.add_heading("Details", level=2)
    document.add_paragraph("First bullet item", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Name", "Value"
    table.cell(1, 0).text, table.cell(1, 1).text = "speed", "42"
    document.save(str(path))
    return path


def make_pptx(path: Path, slides: list[tuple[str, str]], notes: str | None = None) -> Path:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    blank = deck.slides.add_slide(deck.slide_layouts[6])
    shape = blank.shapes.add_table(2, 2, Inches(1), Inches(1), Inches(4), Inches(1))
    shape.table.cell(0, 0).text, shape.table.cell(0, 1).text = "Metric", "Score"
    shape.table.cell(1, 0).text, shape.table.cell(1, 1).text = "recall", "0.93"
    deck.save(str(path))
    return path


def make_xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    workbook.save(str(path))
    return path


def make_pdf(path: Path, pages: list[str], *, user_password: str | None = None,
             owner_password: str | None = None) -> Path:
    """A text PDF, one string per page; encrypted (RC4) when a password is given."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 8, text)
    if user_password is not None or owner_password is not None:
        pdf.set_encryption(owner_password=owner_password or "owner-secret", user_password=user_password or "")
    pdf.output(str(path))
    return path


def make_epub(path: Path, chapters: list[tuple[str, str]], title: str = "A Test Book") -> Path:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("ktui-test-book")
    book.set_title(title)
    book.set_language("en")
    items = []
    for i, (heading, body) in enumerate(chapters, start=1):
        chapter = epub.EpubHtml(title=heading, file_name=f"chap_{i}.xhtml", lang="en")
        chapter.content = f"<html><body><h1>{heading}</h1><p>{body}</p></body></html>"
        book.add_item(chapter)
        items.append(chapter)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = items
    epub.write_epub(str(path), book)
    return path


def markdown_text(rng: random.Random, target_bytes: int = 4096) -> str:
    """A Markdown document of about `target_bytes`: headings, paragraphs, a list, a code block."""
    parts = [f"# {rng.choice(WORDS).title()} {rng.choice(WORDS)} guide\n"]
    size = len(parts[0])
    section = 0
    while size < target_bytes:
        section += 1
        block: list[str] = []
        if section % 3 == 1:
            block.append(f"## Section {section}: {rng.choice(WORDS)} {rng.choice(WORDS)}\n")
        sentences = []
        for _ in range(rng.randint(2, 6)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
            sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "?"]))
        block.append(" ".join(sentences) + "\n")
        if section % 4 == 0:
            block.append("\n".join(f"- {rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(3)) + "\n")
        if section % 7 == 0:
            block.append("```python\n# a comment, not a heading\nprint('hello')\n```\n")
        text = "\n".join(block) + "\n"
        parts.append(text)
        size += len(text)
    return "".join(parts)


def write_markdown_corpus(root: Path, count: int = 2000, size: int = 4096, seed: int = 7) -> list[Path]:
    """`count` Markdown files of about `size` bytes under `root` (20 per folder)."""
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        folder = root / f"part{i // 20:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"doc{i:05d}.md"
        path.write_text(markdown_text(rng, size), encoding="utf-8")
        paths.append(path)
    return paths

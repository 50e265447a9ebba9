"""read_leaf on real files of every supported format, generated here by the real writers."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest import Fetcher, chunk_documents, read_leaf
from ktui.core.models import FileItemData, ItemType, NoteItemData
from tests.support.ingest_fixtures import (
    make_docx,
    make_epub,
    make_pdf,
    make_pptx,
    make_xlsx,
)

SETTINGS = IngestSettings()


@pytest.fixture
async def fetcher():
    f = Fetcher(SETTINGS)
    yield f
    await f.aclose()


async def read(path: Path, fetcher: Fetcher, settings: IngestSettings = SETTINGS):
    return await read_leaf(ItemType.FILE, FileItemData(path=str(path), source=str(path)), settings, fetcher)


async def test_markdown_and_code_and_text(tmp_path: Path, fetcher: Fetcher) -> None:
    md = tmp_path / "guide.md"
    md.write_text("# Guide\n\n## Install\n\nRun `pip install ktui`.\n", encoding="utf-8")
    docs = await read(md, fetcher)
    assert docs[0].metadata == {"source": str(md), "content_type": "text/markdown"}
    chunks = chunk_documents(docs, chunk_size=64, chunk_overlap=8, item_id="i", item_type="file", source=str(md))
    assert chunks[0].metadata["heading"] == "Guide > Install"

    code = tmp_path / "main.py"
    code.write_text("# a comment, not a heading\ndef main():\n    return 42\n")
    docs = await read(code, fetcher)
    assert "def main" in docs[0].text and docs[0].metadata["content_type"] == "text/plain"

    legacy = tmp_path / "notes.txt"
    legacy.write_bytes(("Déjà l'été, la forêt et le château. " * 10).encode("latin-1"))
    assert "château" in (await read(legacy, fetcher))[0].text


async def test_html_main_text(tmp_path: Path, fetcher: Fetcher) -> None:
    page = tmp_path / "page.html"
    body = " ".join(["Semantic search ranks passages by meaning rather than by exact words."] * 6)
    page.write_text(f"""<!doctype html><html><head><meta charset="utf-8"><title>The Page</title>
        <script>var tracking = "nope";</script></head><body>
        <nav><a href="/">Home</a> | <a href="/about">About</a></nav>
        <article><h1>Knowledge bases</h1><p>{body}</p><h2>Hybrid</h2><p>{body} Fusion of both.</p></article>
        <footer>Copyright footer</footer></body></html>""", encoding="utf-8")
    docs = await read(page, fetcher)
    assert docs[0].metadata["title"] == "The Page"
    assert "Semantic search ranks" in docs[0].text and "Fusion of both." in docs[0].text
    assert "tracking" not in docs[0].text


async def test_tiny_html_falls_back_to_all_visible_text(tmp_path: Path, fetcher: Fetcher) -> None:
    page = tmp_path / "tiny.htm"
    page.write_text("<html><body><div>Only a short line</div><script>x=1</script></body></html>")
    docs = await read(page, fetcher)
    assert docs[0].text.strip() == "Only a short line"


async def test_pdf_pages_are_numbered_from_one(tmp_path: Path, fetcher: Fetcher) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", ["First page about apples.", "", "Third page about pears."])
    docs = await read(pdf, fetcher)
    assert [d.metadata["page"] for d in docs] == [1, 3]  # the blank page has no text
    assert "apples" in docs[0].text and "pears" in docs[1].text
    chunks = chunk_documents(docs, chunk_size=50, chunk_overlap=5, item_id="i", item_type="file", source=str(pdf))
    assert [c.metadata["page"] for c in chunks] == [1, 3]


async def test_encrypted_pdf_with_a_password_fails_but_permissions_only_is_read(tmp_path: Path,
                                                                                 fetcher: Fetcher) -> None:
    locked = make_pdf(tmp_path / "locked.pdf", ["Secret text."], user_password="secret")
    with pytest.raises(IngestError, match=r"PDF is encrypted \(password protected\): .*locked\.pdf"):
        await read(locked, fetcher)
    open_ = make_pdf(tmp_path / "perm.pdf", ["Readable text."], owner_password="owner-only")
    assert "Readable text." in (await read(open_, fetcher))[0].text


async def test_aes_encrypted_pdf_is_read_with_empty_user_password(tmp_path: Path, fetcher: Fetcher) -> None:
    from fpdf import FPDF
    from fpdf.enums import EncryptionMethod

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text="AES protected words")
    pdf.set_encryption(owner_password="o", user_password="", encryption_method=EncryptionMethod.AES_128)
    path = tmp_path / "aes.pdf"
    pdf.output(str(path))
    assert "AES protected words" in (await read(path, fetcher))[0].text


async def test_scanned_like_pdf_has_no_text_content(tmp_path: Path, fetcher: Fetcher) -> None:
    blank = make_pdf(tmp_path / "scan.pdf", ["", ""])
    with pytest.raises(IngestError, match=r"no text content: .*scan\.pdf"):
        await read(blank, fetcher)


async def test_docx_headings_lists_and_tables(tmp_path: Path, fetcher: Fetcher) -> None:
    path = make_docx(tmp_path / "report.docx", heading="Chapter One", body="Alpha paragraph text.")
    docs = await read(path, fetcher)
    text = docs[0].text
    assert "# Report Title" in text and "# Chapter One" in text and "## Details" in text
    assert "- First bullet item" in text and "speed | 42" in text
    chunks = chunk_documents(docs, chunk_size=12, chunk_overlap=0, item_id="i", item_type="file", source=str(path))
    alpha = next(c for c in chunks if "Alpha" in c.text)
    assert alpha.metadata["heading"] == "Chapter One"


async def test_pptx_one_document_per_slide(tmp_path: Path, fetcher: Fetcher) -> None:
    path = make_pptx(tmp_path / "deck.pptx", [("Intro", "Hello slide"), ("Results", "Numbers went up")],
                     notes="Say thanks")
    docs = await read(path, fetcher)
    assert [d.metadata["slide"] for d in docs] == [1, 2, 3]
    assert docs[0].metadata["title"] == "Intro" and "Hello slide" in docs[0].text
    assert "Notes: Say thanks" in docs[1].text
    assert "recall | 0.93" in docs[2].text  # the table on the untitled third slide
    chunks = chunk_documents(docs, chunk_size=100, chunk_overlap=10, item_id="i", item_type="file", source="d")
    assert [c.metadata["slide"] for c in chunks] == [1, 2, 3]


async def test_xlsx_one_document_per_sheet_and_csv(tmp_path: Path, fetcher: Fetcher) -> None:
    path = make_xlsx(tmp_path / "book.xlsx", {
        "Scores": [["name", "score"], ["alice", 3], [None, None], ["bob", 4.5]],
        "Empty": [],
        "Notes": [["remember the milk"]],
    })
    docs = await read(path, fetcher)
    assert [d.metadata["sheet"] for d in docs] == ["Scores", "Notes"]
    assert docs[0].text.splitlines() == ["name | score", "alice | 3", "bob | 4.5"]
    csv_path = tmp_path / "t.tsv"
    csv_path.write_text("a\tb\n1\t2\n")
    assert (await read(csv_path, fetcher))[0].text == "a | b\n1 | 2"


async def test_epub_chapters_in_reading_order(tmp_path: Path, fetcher: Fetcher) -> None:
    path = make_epub(tmp_path / "book.epub", [("Chapter A", "Body of A."), ("Chapter B", "Body of B.")])
    docs = await read(path, fetcher)
    assert [d.metadata["chapter"] for d in docs] == [1, 2]
    assert docs[0].metadata["title"] == "A Test Book"
    assert "# Chapter A" in docs[0].text and "Body of B." in docs[1].text


async def test_json_file(tmp_path: Path, fetcher: Fetcher) -> None:
    path = tmp_path / "data.json"
    path.write_text('{"project":"ktui","langs":["python"]}')
    assert '"project": "ktui"' in (await read(path, fetcher))[0].text


# --- failures: each with a specific message naming the file -----------------


async def test_binary_under_a_text_name(tmp_path: Path, fetcher: Fetcher) -> None:
    path = tmp_path / "image.txt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    with pytest.raises(IngestError, match=r"Not a text file \(binary content\): .*image\.txt"):
        await read(path, fetcher)


async def test_empty_file(tmp_path: Path, fetcher: Fetcher) -> None:
    for name in ("empty.md", "empty.pdf", "empty.docx"):
        path = tmp_path / name
        path.write_bytes(b"")
        with pytest.raises(IngestError, match=f"File is empty: .*{name}"):
            await read(path, fetcher)


async def test_blank_text_has_no_text_content(tmp_path: Path, fetcher: Fetcher) -> None:
    path = tmp_path / "blank.txt"
    path.write_text("   \n\n\t  \n")
    with pytest.raises(IngestError, match=r"no text content: .*blank\.txt"):
        await read(path, fetcher)


async def test_vanished_and_unreadable_paths(tmp_path: Path, fetcher: Fetcher) -> None:
    with pytest.raises(IngestError, match=r"File not found: .*gone\.md"):
        await read(tmp_path / "gone.md", fetcher)
    parent_is_a_file = tmp_path / "plain.txt"
    parent_is_a_file.write_text("x")
    with pytest.raises(IngestError, match=r"File cannot be read \(.*\): .*plain\.txt/child\.md"):
        await read(parent_is_a_file / "child.md", fetcher)
    folder = tmp_path / "folder.md"
    folder.mkdir()
    with pytest.raises(IngestError, match=r"Not a file \(a directory\): .*folder\.md"):
        await read(folder, fetcher)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
async def test_a_file_swapped_for_a_fifo_is_refused_without_blocking(tmp_path: Path, fetcher: Fetcher) -> None:
    # validation refuses a FIFO when the item is added; this is the file that became
    # one afterwards. Nobody ever writes to it: a blocking open() would hang here.
    path = tmp_path / "notes.md"
    os.mkfifo(path)
    with pytest.raises(IngestError, match=r"Not a regular file \(a pipe, socket or device\): .*notes\.md"):
        await asyncio.wait_for(read(path, fetcher), 30)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read any file")
async def test_permission_denied(tmp_path: Path, fetcher: Fetcher) -> None:
    path = tmp_path / "secret.md"
    path.write_text("# secret")
    path.chmod(0)
    with pytest.raises(IngestError, match=r"permission denied"):
        await read(path, fetcher)


async def test_file_over_the_size_limit(tmp_path: Path, fetcher: Fetcher) -> None:
    path = tmp_path / "big.md"
    path.write_text("word " * 1000)
    small = IngestSettings(max_file_bytes=1000)
    with pytest.raises(IngestError, match=r"File is too large \(0\.0 MB; limit 0\.0 MB\): .*big\.md"):
        await read(path, fetcher, small)
    assert await read(path, fetcher, IngestSettings(max_file_bytes=5000))


@pytest.mark.parametrize("name,kind", [("broken.docx", "DOCX"), ("broken.pptx", "PPTX"), ("broken.xlsx", "XLSX"),
                                       ("broken.epub", "EPUB")])
async def test_damaged_office_files(tmp_path: Path, fetcher: Fetcher, name: str, kind: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04 this is not really a zip archive" * 10)
    with pytest.raises(IngestError, match=rf"Cannot read {kind} file \(damaged or wrong format\): .*{name}"):
        await read(path, fetcher)


async def test_damaged_pdf(tmp_path: Path, fetcher: Fetcher) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.7\n garbage without any objects \n%%EOF")
    with pytest.raises(IngestError, match=r"broken\.pdf"):
        await read(path, fetcher)
    html_named_pdf = tmp_path / "page.pdf"
    html_named_pdf.write_bytes(b"<html><body>not a pdf</body></html>")
    with pytest.raises(IngestError, match=r"Not a PDF file: .*page\.pdf"):
        await read(html_named_pdf, fetcher)


async def test_unsupported_extension(tmp_path: Path, fetcher: Fetcher) -> None:
    path = tmp_path / "drawing.svg"
    path.write_bytes(b"<svg/>")
    with pytest.raises(IngestError, match=r"Unsupported file type: .*drawing\.svg"):
        await read(path, fetcher)


# --- notes ------------------------------------------------------------------


async def test_note_is_one_markdown_document(fetcher: Fetcher) -> None:
    note = NoteItemData(content="# Todo\r\n\r\nBuy milk.", source="note", source_url="https://example.org/x")
    docs = await read_leaf(ItemType.NOTE, note, SETTINGS, fetcher)
    assert docs[0].text == "# Todo\n\nBuy milk."
    assert docs[0].metadata == {"source": "note", "content_type": "text/markdown",
                                "source_url": "https://example.org/x"}
    with pytest.raises(IngestError, match="Note has no text content"):
        await read_leaf(ItemType.NOTE, NoteItemData(content=" \n ", source="note"), SETTINGS, fetcher)


async def test_mismatched_item_type_and_data(fetcher: Fetcher) -> None:
    with pytest.raises(IngestError, match="Cannot read a file item"):
        await read_leaf(ItemType.FILE, NoteItemData(content="x", source="n"), SETTINGS, fetcher)

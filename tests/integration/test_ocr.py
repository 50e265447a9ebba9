"""OCR (issue 21): scans and screenshots become searchable, through the facade, a real
parse worker and the real Tesseract, on pages generated with Pillow (tests/support/ocr_pages.py).

OCR is CPU-heavy and the suite shares two cores, so the pages here are short (four
lines) and few; the benchmark (tests/benchmarks/test_bench_ocr.py) measures accuracy
and speed on full pages.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

import pytest
from fpdf import FPDF

from ktui.core.config import OcrSettings
from ktui.core.models import ANY_GROUP, ItemChanged, ItemInput, ItemStatus, ItemType
from tests.support.embedding_server import embedding_server_fixture
from tests.support.ocr_pages import CLEAN, NOISY, PageSpec, page_text, render_lines, save_image, save_multipage
from tests.support.services import open_service

pytestmark = pytest.mark.slow

server = embedding_server_fixture(32)

SHORT = {"height": 420}  # four lines of text on a strip of page: cheap to recognise


def short(spec: PageSpec) -> PageSpec:
    return PageSpec(**{**spec.__dict__, **SHORT})


def lines(seed: int) -> list[str]:
    return page_text(seed, lines=4, words_per_line=7)


def phrase(text: str) -> str:
    """Three words from the middle of a page's second line: what a user remembers."""
    rows = text.splitlines()
    words = rows[min(1, len(rows) - 1)].split()
    return " ".join(w.strip(".,;:") for w in words[2:5])


async def leaf_items(ks, base_id):
    return [i for i in (await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)).items if i.type == ItemType.FILE]


async def found(ks, base_id, query) -> set[str]:
    response = await ks.search(base_id, f'"{query}"', mode="bm25", top_k=10)
    return {Path(r.metadata["source"]).name for r in response.results}


@pytest.fixture
def scans(tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    """A folder of images and scanned PDFs; returns it and each file's true page texts."""
    folder = tmp_path / "scans"
    folder.mkdir()
    truth: dict[str, list[str]] = {}
    page = render_lines(lines(1), short(CLEAN["clean sans 28px"]))
    truth["screenshot.png"] = [save_image(page.image.convert("RGBA"), folder / "screenshot.png") and page.text]
    page = render_lines(lines(2), short(NOISY["JPEG q=25 + speckle"]))
    truth["photo.jpg"] = [save_image(page.image, folder / "photo.jpg") and page.text]
    pages = [render_lines(lines(3), short(CLEAN["clean serif 24px"])),
             render_lines(lines(4), short(NOISY["rotated 3°"]))]
    save_multipage([p.image for p in pages], folder / "fax.tiff")
    truth["fax.tiff"] = [p.text for p in pages]
    page = render_lines(lines(5), short(NOISY["blurred r=1.2"]))
    save_multipage([page.image], folder / "scan.pdf")
    truth["scan.pdf"] = [page.text]
    # a mixed PDF: page 1 has a real text layer, page 2 is a scanned image
    typed = "Typed minutes of the harbour council about the lantern budget."
    page = render_lines(lines(6), short(CLEAN["clean mono 22px"]))
    image_path = tmp_path / "page2.png"
    save_image(page.image, image_path)
    pdf = FPDF(format="A4")
    pdf.add_page()
    pdf.set_font("helvetica", size=14)
    pdf.multi_cell(0, 8, typed)
    pdf.add_page()
    pdf.image(str(image_path), x=0, y=0, w=210)
    pdf.output(str(folder / "mixed.pdf"))
    truth["mixed.pdf"] = [typed, page.text]
    return folder, truth


async def test_a_folder_of_scans_and_screenshots_is_found_by_its_words(tmp_path, server, scans):
    folder, truth = scans
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Scans")
        events: list[ItemChanged] = []

        async def listen():
            async for event in ks.subscribe():
                if isinstance(event, ItemChanged) and event.ocr_pages is not None:
                    events.append(event)

        listener = asyncio.create_task(listen())
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=240)
        listener.cancel()
        files = {Path(i.source).name: i for i in await leaf_items(ks, base.id)}
        assert set(files) == set(truth)  # the folder walk keeps images now
        assert all(i.status == ItemStatus.COMPLETED for i in files.values()), {n: i.error for n, i in files.items()}
        for name, texts in truth.items():
            for text in texts:
                assert name in await found(ks, base.id, phrase(text)), (name, phrase(text))
        # the item says which pages were recognised, and how confidently
        assert files["fax.tiff"].data.ocr["pages"] == "1-2"
        assert files["mixed.pdf"].data.ocr["pages"] == "2"  # page 1 kept its text layer
        for item in files.values():
            assert item.data.ocr["engine"].startswith("tesseract")
            assert 50 < item.data.ocr["confidence"] <= 100
        chunks = await ks.list_item_chunks(base.id, files["mixed.pdf"].id)
        by_page = {c.metadata["page"]: c.metadata for c in chunks}
        assert "ocr" not in by_page[1] and by_page[2]["ocr"] is True and by_page[2]["ocr_confidence"] > 50
        # progress counted pages while OCR ran
        fax = [e.ocr_pages for e in events if e.item_id == files["fax.tiff"].id]
        assert fax and fax[-1] == (2, 2) and all(total == 2 for _, total in fax)

        # reindexing an unchanged scan answers every page from the cache
        await ks.reindex_items(base.id, [files["fax.tiff"].id])
        assert await ks.wait_idle(timeout=60)
        again = await ks.get_item(files["fax.tiff"].id)
        assert again.status == ItemStatus.COMPLETED and again.data.ocr["cached_pages"] == 2


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims `width` x `height` pixels in its header (and holds one row)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * (width + 1))) + chunk(b"IEND", b"")


def blank_pdf(path: Path, pages: int) -> Path:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=595, height=842)
    with open(path, "wb") as fh:
        writer.write(fh)
    return path


async def test_huge_images_and_endless_scans_fail_naming_the_limit(tmp_path, server):
    (tmp_path / "bomb.png").write_bytes(png_header_only(30_000, 30_000))
    blank_pdf(tmp_path / "endless.pdf", 10_000)
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Limits")
        added = await ks.add_items(base.id, [ItemInput("file", {"path": str(tmp_path / n)})
                                             for n in ("bomb.png", "endless.pdf")])
        assert await ks.wait_idle(timeout=120)
        bomb, endless = [await ks.get_item(i.id) for i in added]
    assert bomb.status == ItemStatus.FAILED
    assert "30,000 x 30,000" in bomb.error and "ocr.max_pixels" in bomb.error
    assert endless.status == ItemStatus.FAILED
    assert "10,000 pages need OCR" in endless.error and "ocr.max_pages" in endless.error


async def test_without_tesseract_images_say_so_and_mixed_pdfs_keep_their_text(tmp_path, server, scans):
    folder, truth = scans
    missing = OcrSettings(tesseract=str(tmp_path / "no-such-tesseract"))
    async with open_service(tmp_path / "data", server.url, ocr=missing) as ks:
        base = await ks.create_base("No OCR engine")
        added = await ks.add_items(base.id, [ItemInput("file", {"path": str(folder / n)})
                                             for n in ("screenshot.png", "mixed.pdf")])
        assert await ks.wait_idle(timeout=60)
        shot, mixed = [await ks.get_item(i.id) for i in added]
        assert shot.status == ItemStatus.FAILED
        assert "OCR needs Tesseract, which is not installed" in shot.error and "apt install tesseract-ocr" in shot.error
        assert mixed.status == ItemStatus.COMPLETED
        assert mixed.data.ocr["skipped_pages"] == "2" and "Tesseract" in mixed.data.ocr["skipped_reason"]
        assert "mixed.pdf" in await found(ks, base.id, "harbour council")


async def test_a_base_with_ocr_off_leaves_images_out_of_folders(tmp_path, server, scans):
    folder, truth = scans
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Typed only", ocr_enabled=False)
        assert base.ocr_enabled is False
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=60)
        files = {Path(i.source).name: i for i in await leaf_items(ks, base.id)}
        assert set(files) == {"scan.pdf", "mixed.pdf"}
        assert files["scan.pdf"].status == ItemStatus.FAILED
        assert "OCR is off for this base" in files["scan.pdf"].error
        assert files["mixed.pdf"].status == ItemStatus.COMPLETED
        assert files["mixed.pdf"].data.ocr["skipped_pages"] == "2"
        # switching it on is a base setting like any other
        updated = await ks.update_base(base.id, {"ocr_enabled": True, "ocr_languages": "eng", "ocr_max_pages": 10})
        assert (updated.ocr_enabled, updated.ocr_languages, updated.ocr_max_pages) == (True, "eng", 10)


async def test_a_missing_language_fails_naming_its_package_before_any_page_is_read(tmp_path, server, scans):
    """The base asks for a language Tesseract has no model for: the scan fails at once
    (nothing is recognised), the message names the Debian package to install."""
    folder, _ = scans
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Klingon", ocr_languages="eng+tlh")
        [item] = await ks.add_items(base.id, [ItemInput("file", {"path": str(folder / "photo.jpg")})])
        assert await ks.wait_idle(timeout=60)
        failed = await ks.get_item(item.id)
    assert failed.status == ItemStatus.FAILED
    assert "OCR language 'tlh' is not installed for Tesseract" in failed.error
    assert "apt install tesseract-ocr-tlh" in failed.error and "photo.jpg" in failed.error

"""OCR in the TUI (issue 21), on a real scan through the real parse worker and Tesseract:
the item's line counts pages while they are recognised, and its detail (`i`) says which
pages were recognised and with what mean confidence — and which were not, and why.

A `GatedTesseract` (tests/support/ocr_gate.py) holds the second page until the test has
seen the first one counted on screen, so nothing here depends on the machine's speed.
"""

from __future__ import annotations

import pytest
from textual.widgets import Static

from ktui.core.config import OcrSettings
from ktui.core.models import ItemInput, ItemStatus
from ktui.tui.app import KtuiApp
from ktui.tui.screens.item_detail import ItemDetailScreen
from tests.support.ocr_gate import GatedTesseract
from tests.support.ocr_pages import PageSpec, page_text, render_lines, save_multipage
from tests.tui.conftest import MODEL, make_settings, until

SIZE = (140, 40)


def scan(path, seeds):
    pages = [render_lines(page_text(seed, lines=3, words_per_line=6), PageSpec(height=360)) for seed in seeds]
    return save_multipage([p.image for p in pages], path)


def detail_text(app: KtuiApp) -> str:
    return str(app.screen.query_one("#detail", Static).render())


@pytest.mark.slow
async def test_a_scan_counts_its_pages_in_the_tree_and_its_detail_names_them(tmp_path, embedding_server):
    fax = scan(tmp_path / "fax [draft].tiff", (11, 12, 13))
    tesseract = GatedTesseract(tmp_path / "bin", hold=2)
    settings = make_settings(tmp_path / "data", embedding_server).with_(
        ocr=OcrSettings(tesseract=str(tesseract.command)))
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready, pilot, what="service open")
        base = await app.ks.create_base("Scans", MODEL, None)
        app._select_base(base)
        await until(lambda: app.item_tree.base_id == base.id, pilot, what="base selected")
        try:
            [item] = await app.ks.add_items(base.id, [ItemInput("file", {"path": str(fax)})])
            await until(lambda: item.id in app.item_tree.nodes_by_id, pilot, what="the scan in the tree")
            node = app.item_tree.nodes_by_id[item.id]
            # page 2 is held: the line must come to say that one of three pages is done
            await until(lambda: "OCR 1/3 pages" in node.label.plain, pilot, what="OCR progress on the item's line")
            assert node.label.plain.startswith("📄 ◌ fax [draft].tiff  reading  OCR 1/3 pages")
        finally:
            await tesseract.release()
        await until(lambda: node.data.status == ItemStatus.COMPLETED, pilot, what="the scan indexed")
        assert "OCR" not in node.label.plain  # done: no stale page count

        app.item_tree.focus()
        app.item_tree.move_cursor(node)
        await pilot.pause()
        await pilot.press("i")
        await until(lambda: isinstance(app.screen, ItemDetailScreen), pilot, what="item detail")
        await until(lambda: "OCR" in detail_text(app), pilot, what="the detail loaded")
        text = detail_text(app)
        stored = (await app.ks.get_item(item.id)).data.ocr
        assert stored["pages"] == "1-3" and stored["engine"].startswith("tesseract")
        assert f"pages 1-3 (3 pages), mean confidence {stored['confidence']:g} % ({stored['engine']})" in text
        assert 50 < stored["confidence"] <= 100
        await pilot.press("escape")


@pytest.mark.slow
async def test_the_detail_says_which_pages_were_not_recognised_and_why(tmp_path, embedding_server):
    """Without Tesseract a mixed PDF keeps its typed page; the detail names the scanned one."""
    from fpdf import FPDF

    image = tmp_path / "page2.png"
    render_lines(page_text(21, lines=3, words_per_line=6), PageSpec(height=360)).image.save(image)
    pdf = FPDF(format="A4")
    pdf.add_page()
    pdf.set_font("helvetica", size=14)
    pdf.multi_cell(0, 8, "Typed minutes of the harbour council about the lantern budget.")
    pdf.add_page()
    pdf.image(str(image), x=0, y=0, w=210)
    pdf.output(str(tmp_path / "minutes.pdf"))
    settings = make_settings(tmp_path / "data", embedding_server).with_(
        ocr=OcrSettings(tesseract=str(tmp_path / "no-tesseract-here")))
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready, pilot, what="service open")
        base = await app.ks.create_base("Minutes", MODEL, None)
        app._select_base(base)
        await until(lambda: app.item_tree.base_id == base.id, pilot, what="base selected")
        [item] = await app.ks.add_items(base.id, [ItemInput("file", {"path": str(tmp_path / "minutes.pdf")})])
        await until(lambda: item.id in app.item_tree.nodes_by_id
                    and app.item_tree.nodes_by_id[item.id].data.status.is_terminal, pilot, what="indexed")
        node = app.item_tree.nodes_by_id[item.id]
        assert node.data.status == ItemStatus.COMPLETED
        app.item_tree.focus()
        app.item_tree.move_cursor(node)
        await pilot.pause()
        await pilot.press("i")
        await until(lambda: isinstance(app.screen, ItemDetailScreen) and "OCR" in detail_text(app), pilot,
                    what="the detail loaded")
        text = detail_text(app)
        assert "no page was recognised" in text
        assert "not recognised  page 2: OCR needs Tesseract, which is not installed" in " ".join(text.split("\n"))


def test_an_item_line_counts_ocr_pages_only_while_reading():
    from ktui.core.models import FileItemData, ItemPhase, ItemType, KnowledgeItem
    from ktui.tui.widgets.item_tree import ItemNode, node_label

    item = KnowledgeItem("i", "b", None, ItemType.FILE, FileItemData("/x/scan.png", "/x/scan.png"),
                         ItemStatus.PROCESSING, ItemPhase.READING, None, "t", "t")
    node = ItemNode.of(item)
    node.ocr_pages = (0, 1)
    assert node_label(node).plain == "📄 ◌ scan.png  reading  OCR 0/1 page"
    node.ocr_pages = (1200, 1500)
    assert node_label(node).plain == "📄 ◌ scan.png  reading  OCR 1,200/1,500 pages"
    node.phase = ItemPhase.EMBEDDING
    assert "OCR" not in node_label(node).plain


async def test_the_base_form_sets_and_clears_the_base_s_own_ocr_choices(tmp_path, embedding_server):
    from textual.widgets import Input, Select

    from ktui.tui.screens.base_form import BaseFormScreen

    app = KtuiApp(make_settings(tmp_path / "data", embedding_server))
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready, pilot, what="service open")
        await pilot.press("n")
        form = app.screen
        assert isinstance(form, BaseFormScreen)
        await until(lambda: form.query_one("#dimensions", Input).value == "32", pilot, what="dimensions")
        assert form.query_one("#ocr_enabled", Select).value == "settings"
        form.query_one("#name", Input).value = "Typed only"
        form.query_one("#ocr_enabled", Select).value = "off"
        form.query_one("#ocr_languages", Input).value = "eng/deu"  # a typo: the service names the field
        await pilot.press("ctrl+s")
        await until(lambda: "ocr_languages" in str(form.query_one(".dialog-error").render()), pilot, what="error")
        assert app.screen is form
        form.query_one("#ocr_languages", Input).value = "eng+deu"
        form.query_one("#ocr_max_pages", Input).value = "20"
        await pilot.press("ctrl+s")
        await until(lambda: app.bases_pane.current_base is not None, pilot, what="base listed")
        base = app.bases_pane.current_base
        assert (base.ocr_enabled, base.ocr_languages, base.ocr_max_pages) == (False, "eng+deu", 20)
        # edit: the form shows the base's choices; blank and "as in the settings" clear them
        await pilot.press("e")
        form = app.screen
        assert isinstance(form, BaseFormScreen) and form.editing
        assert form.query_one("#ocr_enabled", Select).value == "off"
        assert form.query_one("#ocr_languages", Input).value == "eng+deu"
        assert form.query_one("#ocr_max_pages", Input).value == "20"
        form.query_one("#ocr_enabled", Select).value = "settings"
        form.query_one("#ocr_languages", Input).value = ""
        await pilot.press("ctrl+s")
        await until(lambda: app.bases_pane.current_base.ocr_enabled is None, pilot, what="saved")
        base = await app.ks.get_base(base.id)
        assert (base.ocr_enabled, base.ocr_languages, base.ocr_max_pages) == (None, None, 20)

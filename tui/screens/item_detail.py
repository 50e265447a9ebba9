"""Everything about one item: source, type, status, phase, the whole error, chunks, size,
which pages OCR recognised and how confidently, times, watch state, and for a folder or
sitemap how many children are in which state.

Opened with Enter on a leaf in the tree, `i` on any item, or Enter in the
similar-items list. A failed item offers reindex (`r`, or the button). The facts
are fetched in a worker (`ItemDetailLoaded`); every value is shown literally.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Label, Static

from ktui.core.models import FileItemData, ItemStatus, KnowledgeItem, NoteItemData, WindowOverflow
from ktui.core.service import KnowledgeService
from ktui.tui.keymap import widget_bindings
from ktui.tui.messages import ItemDetailLoaded, ReindexQueued
from ktui.tui.ocr_summary import ocr_rows
from ktui.tui.screens.common import Dialog
from ktui.tui.skip_summary import skipped_summary
from ktui.tui.text import clean, literal, shorten
from ktui.tui.widgets.item_labels import STATUS_WORDS, TYPE_ICONS

CHILD_PAGE = 100
CHILD_LIMIT = 20_000  # children counted at most (a bigger folder says "at least")
ERROR_LIMIT = 20_000


@dataclass
class ItemFacts:
    item: KnowledgeItem
    chunk_count: int | None = None
    text_chars: int | None = None
    size_bytes: int | None = None
    children: Counter[str] = field(default_factory=Counter)
    children_total: int = 0
    children_capped: bool = False


async def gather_facts(ks: KnowledgeService, item: KnowledgeItem) -> ItemFacts:
    item = await ks.get_item(item.id)
    facts = ItemFacts(item)
    if item.type.is_leaf:
        chunks = await ks.list_item_chunks(item.base_id, item.id)
        facts.chunk_count = len(chunks)
        facts.text_chars = sum(len(c.text) for c in chunks)
    else:
        page = 1
        while True:
            result = await ks.list_items(item.base_id, group_id=item.id, page=page, limit=CHILD_PAGE)
            facts.children.update(STATUS_WORDS.get(c.status, str(c.status)) for c in result.items)
            facts.children_total = result.total
            if page >= result.pages:
                break
            if page * CHILD_PAGE >= CHILD_LIMIT:
                facts.children_capped = True
                break
            page += 1
    if isinstance(item.data, FileItemData):
        facts.size_bytes = item.data.size
        if facts.size_bytes is None:
            try:
                facts.size_bytes = (await asyncio.to_thread(os.stat, item.data.source)).st_size
            except OSError:
                facts.size_bytes = None
    elif isinstance(item.data, NoteItemData):
        facts.size_bytes = len(item.data.content.encode("utf-8", "surrogatepass"))
    return facts


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} bytes"


def facts_text(facts: ItemFacts) -> Text:
    """The facts as label/value lines; values are data (cleaned, never markup)."""
    item = facts.item
    rows: list[tuple[str, str, str]] = []

    def row(label: str, value: object, style: str = "") -> None:
        rows.append((label, clean(value), style))

    row("Name", item.display_name)
    row("Type", f"{TYPE_ICONS.get(item.type, '')} {item.type.value}")
    row("Source", item.source)
    if isinstance(item.data, NoteItemData) and item.data.source_url:
        row("Source URL", item.data.source_url)
    status_style = {"failed": "bold red", "done": "green", "processing": "yellow"}.get(
        STATUS_WORDS.get(item.status, ""), "")
    row("Status", STATUS_WORDS.get(item.status, item.status.value), status_style)
    row("Phase", item.phase.value if item.phase else "—")
    if item.type.is_leaf:
        row("Chunks", "—" if facts.chunk_count is None else facts.chunk_count)
        if facts.text_chars is not None:
            row("Text indexed", f"{facts.text_chars:,} characters")
        overflow = WindowOverflow.from_dict(getattr(item.data, "window_overflow", None))
        if overflow is not None:
            row("Window", f"warning: {overflow.describe()}; use a smaller chunk size", "bold yellow")
    if facts.size_bytes is not None:
        row("Size", human_bytes(facts.size_bytes))
    if isinstance(item.data, FileItemData):
        for label, value in ocr_rows(item.data.ocr):  # which pages OCR read, how confidently
            row(label, value, "yellow" if label.strip() in ("low confidence", "not recognised") else "")
    if item.type.is_container:
        total = f"{facts.children_total:,}" + (" (counted the first 20,000)" if facts.children_capped else "")
        row("Children", total)
        if facts.children:
            row("  by state", ", ".join(f"{n:,} {state}" for state, n in sorted(facts.children.items())))
        if item.type.value == "directory":
            row("Watched", "yes: changes are indexed" if getattr(item.data, "watch", False) else "no")
            skipped = skipped_summary(getattr(item.data, "skipped", None))
            if skipped:  # what the folder walk left out, and why
                row("Skipped", skipped, "dim")
    row("Added", item.created_at)
    row("Updated", item.updated_at)
    row("Item id", item.id)
    width = max(len(label) for label, _, _ in rows) + 2
    out = Text()
    for label, value, style in rows:
        out.append(label.ljust(width), "bold")
        out.append(value + "\n", style)
    if item.error:
        out.append("\nError\n", "bold red")
        out.append(clean(shorten(item.error, ERROR_LIMIT)) + "\n", "red")
    return out


class ItemDetailScreen(Dialog):
    BINDINGS: ClassVar[list[Binding]] = Dialog.BINDINGS + widget_bindings(["detail.reindex"])

    def __init__(self, item: KnowledgeItem) -> None:
        super().__init__()
        self.item = item

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog detail"):
            yield Label(literal(f"{TYPE_ICONS.get(self.item.type, '')} {self.item.display_name}", one_line=True),
                        classes="dialog-title")
            with VerticalScroll(id="detail-scroll"):
                yield Static(literal("Loading…"), id="detail")
            yield Static("", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(literal(f"Reindex ({self.key('detail.reindex')})"), variant="warning", id="reindex")
                yield Button(literal(f"Close ({self.key('modal.close')})"), id="close")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#detail-scroll").focus()
        self._load()

    def _load(self) -> None:
        self.run_call(gather_facts(self.ks, self.item), ItemDetailLoaded)

    def on_item_detail_loaded(self, message: ItemDetailLoaded) -> None:
        message.stop()
        if message.error or message.value is None:
            self.show_error(message.error)
            return
        facts: ItemFacts = message.value
        self.item = facts.item
        self.query_one("#detail", Static).update(facts_text(facts))
        button = self.query_one("#reindex", Button)
        button.variant = "error" if facts.item.status == ItemStatus.FAILED else "default"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "reindex":
            self.action_reindex()
        else:
            self.dismiss(None)

    def action_reindex(self) -> None:
        self.run_call(self.ks.reindex_items(self.item.base_id, [self.item.id]), ReindexQueued,
                      name=self.item.display_name)

    def on_reindex_queued(self, message: ReindexQueued) -> None:
        message.stop()
        if message.error:
            self.show_error(message.error)
            return
        self.notify("Reindexing “" + clean(shorten(message.name, 200), one_line=True) + "”", timeout=2)
        self._load()

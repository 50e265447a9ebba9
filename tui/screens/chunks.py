"""Chunk browser (list an item's chunks, delete one) and a chunk shown in its context."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from ktui.core.models import ChunkRecord, KnowledgeItem
from ktui.tui.screens.common import Dialog, Loaded
from ktui.tui.widgets.search_pane import ResultList, query_terms

CONTEXT_RADIUS = 2  # chunks shown before and after the hit


def chunk_prompt(chunk: ChunkRecord) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"#{chunk.chunk_index:<4}", "bold cyan")
    tokens = chunk.metadata.get("token_count")
    if tokens is not None:
        t.append(f"{tokens:>5} tok ", "dim")
    heading = chunk.metadata.get("heading")
    if heading:
        t.append(f"{heading} · ", "green")
    t.append(" ".join(chunk.text.split())[:160])
    return t


class ChunkBrowserScreen(Dialog):
    """dismiss(number of chunks deleted)."""

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("d,delete", "delete_chunk", "Delete chunk", id="chunks.delete"),
    ]

    def __init__(self, item: KnowledgeItem) -> None:
        super().__init__()
        self.item = item
        self.chunks: list[ChunkRecord] = []
        self.deleted = 0

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog chunks"):
            yield Label(f"Chunks of “{self.item.display_name}”", classes="dialog-title")
            with Horizontal():
                yield ResultList(id="chunk-list")
                with VerticalScroll(id="chunk-preview-box"):
                    yield Static("", id="chunk-preview")
            yield Static("", classes="dialog-error")
            yield Static("j/k move · d delete the chunk · Esc close", classes="dialog-hint")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#chunk-list").focus()
        self._load()

    def _load(self) -> None:
        self.run_call("chunks", self.ks.list_item_chunks(self.item.base_id, self.item.id))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.error:
            self.show_error(message.error)
            if message.what == "delete":
                self._load()
            return
        if message.what == "chunks":
            self._show(message.value)
        elif message.what == "delete":
            self.deleted += 1
            self.notify("Chunk deleted")
            self._load()

    def _show(self, chunks: list[ChunkRecord]) -> None:
        listing = self.query_one("#chunk-list", OptionList)
        keep = listing.highlighted or 0
        self.chunks = sorted(chunks, key=lambda c: c.chunk_index)
        listing.clear_options()
        listing.add_options(Option(chunk_prompt(c), id=c.id) for c in self.chunks)
        if self.chunks:
            listing.highlighted = min(keep, len(self.chunks) - 1)
        else:
            self.query_one("#chunk-preview", Static).update(Text("This item has no chunks.", "dim"))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        idx = event.option_index
        if 0 <= idx < len(self.chunks):
            self.query_one("#chunk-preview", Static).update(self.chunks[idx].text)

    def action_delete_chunk(self) -> None:
        idx = self.query_one("#chunk-list", OptionList).highlighted
        if idx is None or not (0 <= idx < len(self.chunks)):
            return
        chunk = self.chunks[idx]
        self.run_call("delete", self.ks.delete_item_chunk(self.item.base_id, self.item.id, chunk.id))

    def action_close(self) -> None:
        self.dismiss(self.deleted)


class ChunkContextScreen(Dialog):
    """A search hit with the chunks around it, the query's words highlighted."""

    def __init__(self, base_id: str, item_id: str, chunk_id: str, query: str, source: str) -> None:
        super().__init__()
        self.base_id = base_id
        self.item_id = item_id
        self.chunk_id = chunk_id
        self.terms = query_terms(query)
        self.source = source

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog context"):
            yield Label(self.source, classes="dialog-title")
            with VerticalScroll(id="context-scroll"):
                yield Static("Loading…", id="context")
            yield Static("", classes="dialog-error")
            yield Static("Esc close", classes="dialog-hint")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#context-scroll").focus()
        self.run_call("chunks", self.ks.list_item_chunks(self.base_id, self.item_id))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.error:
            self.show_error(message.error)
            self.query_one("#context", Static).update("")
            return
        chunks = sorted(message.value, key=lambda c: c.chunk_index)
        pos = next((i for i, c in enumerate(chunks) if c.id == self.chunk_id), None)
        if pos is None:
            self.query_one("#context", Static).update(Text("The chunk no longer exists.", "yellow"))
            return
        out = Text()
        for c in chunks[max(0, pos - CONTEXT_RADIUS): pos + CONTEXT_RADIUS + 1]:
            hit = c.id == self.chunk_id
            out.append(f"── chunk {c.chunk_index}{'  ◀ match' if hit else ''} ──\n", "bold cyan" if hit else "dim")
            body = Text(c.text.strip() + "\n\n", style="" if hit else "dim")
            if hit:
                for term in self.terms:
                    body.highlight_words([term], "bold reverse", case_sensitive=False)
            out.append_text(body)
        self.query_one("#context", Static).update(out)

"""Chunk browser (list an item's chunks, delete one after asking) and a chunk shown in its context.

Chunk text is document text: shown literally (`ktui.tui.text`), query words
highlighted by position, never by markup.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from ktui.core.models import ChunkRecord, KnowledgeItem
from ktui.tui.keymap import widget_bindings
from ktui.tui.messages import ChunkDeleted, ChunksLoaded
from ktui.tui.screens.common import Dialog
from ktui.tui.screens.confirm import ConfirmScreen
from ktui.tui.text import clean, literal, rich_literal, shorten
from ktui.tui.widgets.search_pane import ResultList, highlight_terms, query_terms

CONTEXT_RADIUS = 2  # chunks shown before and after the hit
PREVIEW_LIMIT = 20_000  # characters of one chunk drawn in a preview


def chunk_prompt(chunk: ChunkRecord) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"#{chunk.chunk_index:<4}", "bold cyan")
    tokens = chunk.metadata.get("token_count")
    if isinstance(tokens, int):
        t.append(f"{tokens:>5} tok ", "dim")
    heading = chunk.metadata.get("heading")
    if heading:
        t.append(clean(shorten(str(heading), 80), one_line=True) + " · ", "green")
    t.append(clean(shorten(" ".join(chunk.text.split()), 160), one_line=True))
    return t


class ChunkBrowserScreen(Dialog):
    """dismiss(number of chunks deleted)."""

    BINDINGS: ClassVar[list[Binding]] = widget_bindings(["chunks.delete"])

    def __init__(self, item: KnowledgeItem) -> None:
        super().__init__()
        self.item = item
        self.chunks: list[ChunkRecord] = []
        self.deleted = 0
        self.loaded = False  # the first listing arrived

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog chunks"):
            yield Label(literal(f"Chunks of “{self.item.display_name}”", one_line=True), classes="dialog-title")
            with Horizontal():
                yield ResultList(id="chunk-list")
                with VerticalScroll(id="chunk-preview-box"):
                    yield Static("", id="chunk-preview")
            yield Static("", classes="dialog-error")
            yield Static(literal(f"{self.key('list.down')}/{self.key('list.up')} move · "
                                 f"{self.key('chunks.delete')} delete the chunk · {self.key('modal.close')} close"),
                         classes="dialog-hint")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#chunk-list").focus()
        self._load()

    def _load(self) -> None:
        self.run_call(self.ks.list_item_chunks(self.item.base_id, self.item.id), ChunksLoaded)

    def on_chunks_loaded(self, message: ChunksLoaded) -> None:
        message.stop()
        if message.error or message.value is None:
            self.show_error(message.error)
            return
        self._show(message.value)

    def on_chunk_deleted(self, message: ChunkDeleted) -> None:
        message.stop()
        if message.error:
            self.show_error(message.error)
        else:
            self.deleted += 1
            self.notify("Chunk deleted", timeout=2)
        self._load()

    def _show(self, chunks: list[ChunkRecord]) -> None:
        listing = self.query_one("#chunk-list", OptionList)
        keep = listing.highlighted or 0
        self.loaded = True
        self.chunks = sorted(chunks, key=lambda c: c.chunk_index)
        listing.clear_options()
        listing.add_options(Option(chunk_prompt(c), id=c.id) for c in self.chunks)
        if self.chunks:
            listing.highlighted = min(keep, len(self.chunks) - 1)
        else:
            self.query_one("#chunk-preview", Static).update(literal("This item has no chunks.", "dim"))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        idx = event.option_index
        if 0 <= idx < len(self.chunks):
            self.query_one("#chunk-preview", Static).update(literal(shorten(self.chunks[idx].text, PREVIEW_LIMIT)))

    def action_delete_chunk(self) -> None:
        idx = self.query_one("#chunk-list", OptionList).highlighted
        if idx is None or not (0 <= idx < len(self.chunks)):
            return
        chunk = self.chunks[idx]

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_call(self.ks.delete_item_chunk(self.item.base_id, self.item.id, chunk.id), ChunkDeleted,
                              chunk_id=chunk.id)

        preview = shorten(" ".join(chunk.text.split()), 200)
        self.app.push_screen(ConfirmScreen("Delete chunk", f"Delete chunk #{chunk.chunk_index} of "
                                           f"“{self.item.display_name}”?\n\n{preview}"), confirmed)

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
            yield Label(literal(self.source, one_line=True), classes="dialog-title")
            with VerticalScroll(id="context-scroll"):
                yield Static(literal("Loading…"), id="context")
            yield Static("", classes="dialog-error")
            yield Static(literal(f"{self.key('modal.close')} close"), classes="dialog-hint")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#context-scroll").focus()
        self.run_call(self.ks.list_item_chunks(self.base_id, self.item_id), ChunksLoaded)

    def on_chunks_loaded(self, message: ChunksLoaded) -> None:
        message.stop()
        if message.error or message.value is None:
            self.show_error(message.error)
            self.query_one("#context", Static).update("")
            return
        chunks = sorted(message.value, key=lambda c: c.chunk_index)
        pos = next((i for i, c in enumerate(chunks) if c.id == self.chunk_id), None)
        if pos is None:
            self.query_one("#context", Static).update(literal("The chunk no longer exists.", "yellow"))
            return
        out = Text()
        for c in chunks[max(0, pos - CONTEXT_RADIUS): pos + CONTEXT_RADIUS + 1]:
            hit = c.id == self.chunk_id
            out.append(f"── chunk {c.chunk_index}{'  ◀ match' if hit else ''} ──\n", "bold cyan" if hit else "dim")
            body = rich_literal(shorten(c.text.strip(), PREVIEW_LIMIT) + "\n\n", "" if hit else "dim")
            if hit:
                highlight_terms(body, self.terms)
            out.append_text(body)
        self.query_one("#context", Static).update(out)

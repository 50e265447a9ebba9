"""Items similar to the one under the cursor (the Knowledge Engine's domain wrapper).

The facade's `similar_items` ranks the base's items with `core.search.similar`
(each item represented by its chunks, embedded with the base's own model);
without a usable embedder the engine falls back to keyword matching, and the
dialog says so (DEGRADED plus the reason).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from ktui.core.engine import RankResult
from ktui.core.models import KnowledgeBase, KnowledgeItem
from ktui.tui.messages import SimilarRanked
from ktui.tui.screens.common import Dialog
from ktui.tui.screens.item_detail import ItemDetailScreen
from ktui.tui.text import clean, literal
from ktui.tui.widgets.item_labels import TYPE_ICONS
from ktui.tui.widgets.search_pane import ResultList

TOP_K = 10


class SimilarScreen(Dialog):
    def __init__(self, base: KnowledgeBase, item: KnowledgeItem) -> None:
        super().__init__()
        self.base = base
        self.item = item
        self.matches: list[KnowledgeItem] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog similar"):
            yield Label(literal(f"Similar to “{self.item.display_name}”", one_line=True), classes="dialog-title")
            yield Static(literal("Ranking…"), id="similar-status")
            yield ResultList(id="similar-list")
            yield Static("", classes="dialog-error")
            yield Static(literal(f"Enter opens the item's details · {self.key('modal.close')} close"),
                         classes="dialog-hint")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#similar-list").focus()
        self.run_call(self.ks.similar_items(self.base.id, self.item.id, TOP_K), SimilarRanked)

    def on_similar_ranked(self, message: SimilarRanked) -> None:
        message.stop()
        status = self.query_one("#similar-status", Static)
        if message.error or message.value is None:
            status.update("")
            self.show_error(message.error)
            return
        result: RankResult = message.value
        self.matches = [m.candidate for m in result.matches]
        listing = self.query_one("#similar-list", ResultList)
        listing.clear_options()
        for m in result.matches:
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append(f"{m.rank:>2}. ", "bold")
            t.append(f"{m.score:.3f}  ", "cyan")
            t.append(TYPE_ICONS.get(m.candidate.type, "•") + " ")
            t.append(clean(m.candidate.display_name, one_line=True))
            listing.add_option(Option(t, id=m.candidate.id))
        n = len(result.matches)
        head = Text(f"{n} similar item{'s' if n != 1 else ''} (score: cosine similarity of the items' "
                    "chunks, 1 = same)" if n else "No other item in this base is similar.")
        if result.degraded:
            head = Text("keyword results only ", "bold yellow")
            head.append(f"({clean(result.reason or 'the embedding model is unavailable', one_line=True)})",
                        "yellow")
        status.update(head)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a similar item opens its details (over this dialog; Esc comes back)."""
        idx = event.option_index
        if 0 <= idx < len(self.matches):
            self.app.push_screen(ItemDetailScreen(self.matches[idx]))

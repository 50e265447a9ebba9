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
from textual.widgets import Label, Static
from textual.widgets.option_list import Option

from ktui.core.engine import RankResult
from ktui.core.models import KnowledgeBase, KnowledgeItem
from ktui.tui.screens.common import Dialog, Loaded
from ktui.tui.widgets.item_tree import TYPE_ICONS
from ktui.tui.widgets.search_pane import ResultList

TOP_K = 10


class SimilarScreen(Dialog):
    def __init__(self, base: KnowledgeBase, item: KnowledgeItem) -> None:
        super().__init__()
        self.base = base
        self.item = item

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog similar"):
            yield Label(f"Similar to “{self.item.display_name}”", classes="dialog-title")
            yield Static("Ranking…", id="similar-status")
            yield ResultList(id="similar-list")
            yield Static("", classes="dialog-error")
            yield Static("Esc close", classes="dialog-hint")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#similar-list").focus()
        self.run_call("similar", self.ks.similar_items(self.base.id, self.item.id, TOP_K))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        status = self.query_one("#similar-status", Static)
        if message.error:
            status.update("")
            self.show_error(message.error)
            return
        result: RankResult = message.value
        listing = self.query_one("#similar-list", ResultList)
        listing.clear_options()
        for m in result.matches:
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append(f"{m.rank:>2}. ", "bold")
            t.append(f"{m.score:.3f}  ", "cyan")
            t.append(TYPE_ICONS.get(m.candidate.type, "•") + " ")
            t.append(m.candidate.display_name)
            listing.add_option(Option(t, id=m.candidate.id))
        head = Text(f"{len(result.matches)} similar item(s)")
        if result.degraded:
            head.append("  DEGRADED ", "bold white on red")
            head.append(f" keyword fallback: {result.reason}", "red")
        status.update(head)

"""Items similar to the one under the cursor (the Knowledge Engine's domain wrapper).

Candidates are the base's leaf items; each is represented by its first chunks
(`core.similar.format_item_for_embedding`), embedded with the base's own model
through the facade's embedder, ranked by `core.similar.rank_similar_items`.
Without an embedder the engine falls back to keyword matching, and the dialog
says so.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Static
from textual.widgets.option_list import Option

from core.engine import RankResult, service_embedder
from core.models import ANY_GROUP, KnowledgeBase, KnowledgeItem
from core.similar import rank_similar_items
from tui.screens.common import Dialog, Loaded
from tui.widgets.item_tree import TYPE_ICONS
from tui.widgets.search_pane import ResultList

MAX_CANDIDATES = 500
CHUNKS_PER_ITEM = 3


async def find_similar(ks: Any, base: KnowledgeBase, target: KnowledgeItem, top_k: int = 10) -> RankResult:
    """Gather candidates and texts through the facade, then rank with the engine."""
    candidates: list[KnowledgeItem] = []
    page = 1
    while len(candidates) < MAX_CANDIDATES:
        result = await ks.list_items(base.id, group_id=ANY_GROUP, page=page, limit=100)
        candidates.extend(i for i in result.items if i.type.is_leaf)
        if page >= result.pages:
            break
        page += 1
    texts: dict[str, list[str]] = {}
    for item in [target, *candidates]:
        if item.id in texts:
            continue
        chunks = await ks.list_item_chunks(base.id, item.id)
        texts[item.id] = [c.text for c in sorted(chunks, key=lambda c: c.chunk_index)[:CHUNKS_PER_ITEM]]
    embedder = None
    embeddings = getattr(ks, "embeddings", None)  # the facade's EmbeddingService, when exposed
    if embeddings is not None and base.embedding_model_id:
        embedder = service_embedder(embeddings, base.embedding_model_id, dimensions=base.dimensions)
    return await rank_similar_items(target, candidates, texts, embedder, top_k=top_k)


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
        self.run_call("similar", find_similar(self.ks, self.base, self.item))

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

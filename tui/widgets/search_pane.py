"""The search pane: query, mode, top-K, ranked results, a preview of the highlighted hit.

A result line says where the hit comes from (the path inside the folder that was
added, or the URL, and the heading), a score a person can read (see
`score_label`), and a snippet with the query's words highlighted. Above the
list one status line says what happened — "No results", "keyword results
only (…)" — in full, wrapped, never cut. All document text is drawn literally
(`ktui.tui.text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePath
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from ktui.core.models import KnowledgeBase, KnowledgeSearchResult, ScoreKind, SearchResponse
from ktui.tui.host import key_hint
from ktui.tui.keymap import widget_bindings
from ktui.tui.search_modes import mode_name, mode_options, next_mode
from ktui.tui.text import clean, rich_literal, shorten

_WORD = re.compile(r"\w+", re.UNICODE)
SNIPPET_WIDTH = 150
PREVIEW_LIMIT = 20_000


def query_terms(query: str) -> list[str]:
    """Words worth highlighting: three characters or more ("do", "a" would light up everywhere)."""
    return list(dict.fromkeys(w for w in _WORD.findall(query.lower()) if len(w) > 2))


def highlight_terms(text: Text, terms: list[str]) -> Text:
    """Highlight whole words and their stems ("repair" in "repairs"), not "do" in "dogs"."""
    for term in terms:
        text.highlight_regex(re.compile(r"\b" + re.escape(term), re.IGNORECASE), "bold reverse")
    return text


def short_source(metadata: dict, roots: Iterable[str] = ()) -> str:
    """Where a hit comes from: the URL, or the file's path inside the folder that was added
    (`handbook/repairs.md` under the folder `demo-corpus`), or the file's name."""
    source = str(metadata.get("source") or "")
    if "://" in source:
        return source
    path = PurePath(source)
    for root in roots:
        root_path = PurePath(root)
        if path.is_relative_to(root_path) and path != root_path:
            return str(PurePath(root_path.name) / path.relative_to(root_path))
    return path.name or source or "?"


def score_label(result: KnowledgeSearchResult) -> tuple[str, str]:
    """(figure, what it means) for a person: a 0–1 relevance where the service gives one,
    else the score with its kind; hybrid (RRF) scores are rank arithmetic, so only the rank shows."""
    relevance = getattr(result, "relevance", None)
    if isinstance(relevance, (int, float)):
        return f"{relevance:.2f}", "relevance 0–1"
    match result.score_kind:
        case ScoreKind.COSINE:
            return f"{result.score:.2f}", "similarity 0–1"
        case ScoreKind.RERANK:
            return f"{result.score:.2f}", "reranker score"
        case ScoreKind.BM25:
            return f"{result.score:.1f}", "keyword score (higher is better)"
        case _:
            return "", "hybrid rank (vector + keyword ranks fused)"


def snippet(text: str, terms: list[str], width: int = SNIPPET_WIDTH) -> Text:
    """A window of the chunk around the first query term, terms highlighted."""
    flat = " ".join(shorten(text, 50_000).split())
    lower = flat.lower()
    patterns = [re.compile(r"\b" + re.escape(term), re.IGNORECASE) for term in terms]
    hits = [m.start() for p in patterns if (m := p.search(lower))]
    start = max(0, min(hits) - width // 4) if hits else 0
    piece = flat[start:start + width]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(flat) else ""
    return highlight_terms(rich_literal(prefix + piece + suffix, one_line=True), terms)


def result_prompt(result: KnowledgeSearchResult, terms: list[str], roots: Iterable[str] = (),
                  base_name: str | None = None) -> Text:
    """Two lines, each cut at the pane's edge: where the hit is from (its base first when
    several were searched), then the snippet (the preview below the list, or Enter,
    shows the whole chunk)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{result.rank:>2}. ", "bold")
    figure, _ = score_label(result)
    if figure:
        t.append(figure + " ", "cyan")
    if base_name:
        t.append("[", "magenta")
        t.append(clean(shorten(base_name, 60), one_line=True), "magenta")
        t.append("] ", "magenta")
    t.append(clean(shorten(short_source(result.metadata, roots), 300), one_line=True), "bold green")
    heading = result.metadata.get("heading")
    if heading:
        t.append(" › " + clean(shorten(str(heading), 200), one_line=True), "green")
    t.append("\n")
    t.append_text(snippet(result.page_content, terms))
    return t


class ResultList(OptionList):
    """A list of results (also the chunk and similar lists): j/k, g/G, n/N move, Enter opens."""

    BINDINGS: ClassVar[list[Binding]] = widget_bindings(
        ["results.open", "list.down", "list.up", "list.top", "list.bottom", "results.next", "results.prev",
         "pane.left"])

    def action_next_result(self) -> None:
        if self.option_count:
            self.highlighted = 0 if self.highlighted is None else (self.highlighted + 1) % self.option_count

    def action_previous_result(self) -> None:
        if self.option_count:
            self.highlighted = self.option_count - 1 if self.highlighted is None \
                else (self.highlighted - 1) % self.option_count

    async def action_pane_left(self) -> None:
        if self.id == "results":
            await self.app.run_action("focus_pane('items')")


class QueryInput(Input):
    """The query box: Esc leaves it for the results (or the items when there are none)."""

    BINDINGS: ClassVar[list[Binding]] = widget_bindings(["input.leave"])

    async def action_leave(self) -> None:
        results = self.app.query_one("#results", ResultList)
        await self.app.run_action("focus_pane('results')" if results.option_count else "focus_pane('items')")


class SearchPane(Vertical):
    """Posts nothing itself: the app reacts to Input.Submitted and OptionList.OptionSelected."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.results: list[KnowledgeSearchResult] = []
        self.terms: list[str] = []

    def compose(self) -> ComposeResult:
        yield QueryInput(placeholder=f"Search the base…  ({key_hint(self, 'app.search')} to focus, Enter to run)",
                         id="query")
        with Horizontal(id="search-controls"):
            yield Select(mode_options(), value="hybrid", allow_blank=False, id="mode", compact=True)
            yield Label("top-K", id="topk-label")
            yield QueryInput(value="10", type="integer", id="topk", tooltip="top-K: how many results", compact=True)
        yield Static("", id="search-status")
        yield ResultList(id="results")
        with VerticalScroll(id="preview-box"):
            yield Static("", id="preview")

    @property
    def query_text(self) -> str:
        return self.query_one("#query", Input).value

    @property
    def mode(self) -> str:
        return str(self.query_one("#mode", Select).value)

    @property
    def top_k(self) -> int | None:
        raw = self.query_one("#topk", Input).value.strip()
        try:
            return max(1, min(1000, int(raw))) if raw else None
        except ValueError:
            return None

    def set_defaults(self, mode: str, top_k: int) -> None:
        self.query_one("#mode", Select).value = mode
        self.query_one("#topk", Input).value = str(top_k)

    def cycle_mode(self) -> str:
        select = self.query_one("#mode", Select)
        select.value = next_mode(str(select.value))
        return mode_name(str(select.value))

    def show_status(self, text: Text) -> None:
        self._store_warning_for = None
        self.query_one("#search-status", Static).update(text)

    _store_warning_for: str | None = None  # the base whose store warning the status line shows

    def show_store_problem(self, base: KnowledgeBase | None, rebuild_key: str) -> None:
        """A base whose store is missing or damaged says why, and which key rebuilds it, in the
        status line (wrapped, never cut); the warning goes once the store is fine again."""
        if base is not None and base.is_usable and base.needs_rebuild:
            status = Text("⚠ This base's store needs a rebuild: ", "bold yellow")
            status.append(clean(shorten(base.store_problem or "", 2000)), "yellow")
            status.append(f"\n{rebuild_key} reindexes every item from its source; until then search fails.", "yellow")
            self.show_status(status)
            self._store_warning_for = base.id
        elif self._store_warning_for is not None:
            self.show_status(Text())

    def show_response(self, query: str, response: SearchResponse, mode: str, roots: Iterable[str] = (), *,
                      base_names: dict[str, str] | None = None, scope: str = "", terms_query: str = "") -> None:
        """`base_names` (several bases searched): each result names its base; `scope` is
        said after the count; `terms_query` is what to highlight (default `query`)."""
        self.terms = query_terms(terms_query or query)
        roots = list(roots)
        self.results = list(response.results)
        results = self.query_one(ResultList)
        results.clear_options()
        names = base_names or {}
        results.add_options(
            Option(result_prompt(r, self.terms, roots, names.get(r.base_id or "") if names else None), id=r.chunk_id)
            for r in self.results)
        n = len(self.results)
        status = Text()
        if response.degraded and not response.notices:  # several bases: each says its own below
            status.append("keyword results only ", "bold yellow")
            status.append("(" + clean(response.reason or "the embedding model is unavailable", one_line=True) + ")\n",
                          "yellow")
        for notice in response.notices:  # several bases: what each one had to say
            status.append(clean(shorten(notice.base_name, 60), one_line=True) + ": ", "bold yellow")
            status.append(("keyword results only: " if notice.degraded else "")
                          + clean(shorten(notice.reason, 200), one_line=True) + "\n", "yellow")
        quoted = clean(shorten(query, 200), one_line=True)
        if response.mode is not None:
            mode = response.mode.value  # the mode that produced the results (bm25 after a fallback)
        if n:
            status.append(f"{n} result{'s' if n != 1 else ''} for “{quoted}” ({mode_name(mode)})", "dim")
            if scope:
                status.append(" · " + clean(shorten(scope, 200), one_line=True), "dim")
            kinds = dict.fromkeys(score_label(r)[1] for r in self.results)
            status.append(" · score: " + ", ".join(kinds), "dim")
        else:
            status.append(f"No results for “{quoted}” ({mode_name(mode)}"
                          + (" · " + clean(shorten(scope, 200), one_line=True) if scope else "") + ").", "bold yellow")
        self.show_status(status)
        if n:
            results.highlighted = 0
        else:
            self.show_preview(None)

    def show_failure(self, query: str, error: str) -> None:
        self.results = []
        self.query_one(ResultList).clear_options()
        self.show_preview(None)
        status = Text(f"Search for “{clean(shorten(query, 200), one_line=True)}” failed: ", "bold red")
        status.append(clean(shorten(error, 2000)), "red")
        self.show_status(status)

    def show_preview(self, result: KnowledgeSearchResult | None) -> None:
        preview = self.query_one("#preview", Static)
        if result is None:
            preview.update("")
            return
        body = rich_literal(shorten(result.page_content.strip(), PREVIEW_LIMIT))
        preview.update(highlight_terms(body, self.terms))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "results":
            self.show_preview(self.selected_result)

    def clear_results(self) -> None:
        self.results = []
        self.query_one(ResultList).clear_options()
        self.show_status(Text())
        self.show_preview(None)

    @property
    def selected_result(self) -> KnowledgeSearchResult | None:
        idx = self.query_one(ResultList).highlighted
        return self.results[idx] if idx is not None and 0 <= idx < len(self.results) else None

"""The search pane: query, mode, top-K, ranked results with highlighted snippets."""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from ktui.core.models import KnowledgeSearchResult, SearchResponse

MODES = [("hybrid", "hybrid"), ("vector (default)", "default"), ("bm25 (keywords)", "bm25")]
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """Words worth highlighting: three characters or more ("do", "a" would light up everywhere)."""
    return list(dict.fromkeys(w for w in _WORD.findall(query.lower()) if len(w) > 2))


def short_source(metadata: dict) -> str:
    """A file's name (never the whole path: paths are noise here), or the URL."""
    source = str(metadata.get("source") or "")
    if "://" in source:
        return source
    return PurePath(source).name or source or "?"


def snippet(text: str, terms: list[str], width: int = 150) -> Text:
    """A window of the chunk around the first query term, terms highlighted."""
    flat = " ".join(text.split())
    lower = flat.lower()
    patterns = [re.compile(r"\b" + re.escape(term), re.IGNORECASE) for term in terms]
    hits = [m.start() for p in patterns if (m := p.search(lower))]
    start = max(0, min(hits) - width // 4) if hits else 0
    piece = flat[start:start + width]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(flat) else ""
    out = Text(prefix + piece + suffix, style="")
    for pattern in patterns:  # whole words and their stems ("repair" in "repairs"), not "do" in "dogs"
        out.highlight_regex(pattern, "bold reverse")
    return out


def result_prompt(result: KnowledgeSearchResult, terms: list[str]) -> Text:
    t = Text()
    t.append(f"{result.rank:>2}. ", "bold")
    t.append(f"{result.score:.3f}", "cyan")
    t.append(f" {result.score_kind.value}", "dim")
    t.append("  ")
    t.append(short_source(result.metadata), "bold green")
    heading = result.metadata.get("heading")
    if heading:
        t.append(f" › {heading}", "green")
    t.append("\n")
    t.append_text(snippet(result.page_content, terms))
    return t


class ResultList(OptionList):
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("j", "cursor_down", "Down", show=False, id="list.down"),
        Binding("k", "cursor_up", "Up", show=False, id="list.up"),
    ]


class SearchPane(Vertical):
    """Posts nothing itself: the app reacts to Input.Submitted and OptionList.OptionSelected."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.results: list[KnowledgeSearchResult] = []

    def compose(self) -> ComposeResult:
        yield Input(placeholder="Search the base…  (/ to focus, Enter to run)", id="query")
        with Horizontal(id="search-controls"):
            yield Select(MODES, value="hybrid", allow_blank=False, id="mode")
            yield Label("top-K", id="topk-label")
            yield Input(value="10", type="integer", id="topk", tooltip="top-K")
        yield Static("", id="search-status")
        yield ResultList(id="results")

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
        values = [v for _, v in MODES]
        select = self.query_one("#mode", Select)
        select.value = values[(values.index(str(select.value)) + 1) % len(values)]
        return str(select.value)

    def show_status(self, text: str | Text) -> None:
        self.query_one("#search-status", Static).update(text)

    def show_response(self, query: str, response: SearchResponse, mode: str) -> None:
        terms = query_terms(query)
        self.results = list(response.results)
        results = self.query_one(ResultList)
        results.clear_options()
        results.add_options(Option(result_prompt(r, terms), id=r.chunk_id) for r in self.results)
        status = Text()
        if response.degraded:
            status.append(" DEGRADED ", "bold white on red")
            status.append(f" keyword fallback: {response.reason or 'the query could not be embedded'}  ", "red")
        n = len(self.results)
        status.append(f"{n} result{'s' if n != 1 else ''} for “{query}” ({mode})", "dim" if n else "yellow")
        self.show_status(status)
        if n:
            results.highlighted = 0

    def clear_results(self) -> None:
        self.results = []
        self.query_one(ResultList).clear_options()
        self.show_status("")

    @property
    def selected_result(self) -> KnowledgeSearchResult | None:
        idx = self.query_one(ResultList).highlighted
        return self.results[idx] if idx is not None and 0 <= idx < len(self.results) else None

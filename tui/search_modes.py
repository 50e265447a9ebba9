"""The search modes as the user sees them: one name each, everywhere in the TUI.

The names are the CLI's `--mode` names (`hybrid`, `vector`, `bm25`); the stored
value of `vector` is the design's `default` (cosine similarity over vectors),
which is accepted as an alias wherever a mode is typed.
"""

from __future__ import annotations

from rich.text import Text

from ktui.core.models import SearchMode

MODE_NAMES: dict[str, str] = {
    SearchMode.HYBRID.value: "hybrid",
    SearchMode.DEFAULT.value: "vector",
    SearchMode.BM25.value: "bm25",
}
"""Stored value -> the one name shown and typed."""

MODE_HINTS: dict[str, str] = {
    SearchMode.HYBRID.value: "vector + keywords",
    SearchMode.DEFAULT.value: "meaning",
    SearchMode.BM25.value: "keywords",
}


def mode_name(value: str) -> str:
    return MODE_NAMES.get(value, value)


def mode_options(*, hints: bool = False) -> list[tuple[Text, str]]:
    """Options for a `Select`: (prompt, stored value), in the order of the mode cycle."""
    return [(Text(f"{name} ({MODE_HINTS[value]})" if hints else name), value) for value, name in MODE_NAMES.items()]


def next_mode(value: str) -> str:
    values = list(MODE_NAMES)
    return values[(values.index(value) + 1) % len(values)] if value in values else values[0]

"""What the TUI's query box understands besides words: scope and filters.

The CLI has `--all`, several bases, `--type`, `--under` and `--after`; the query box
takes the same as words of the query, so they stay a keystroke away and need no
extra widgets on an 80-column screen:

    kites in:all                     every usable base (results name their base)
    kites in:Docs in:"Team wiki"     these bases (names or ids, as `ktui search`)
    kites type:file type:url         only these item types (as --type)
    kites under:~/notes/2026         only items whose path or URL starts with it
    kites after:2026-11-01           only items added or reindexed since then

A value with spaces is quoted. Whatever else is typed is the query, unchanged.
Parsing is pure (no I/O); names are resolved by the app through the facade.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ktui.core.models import ItemType

_TOKEN = re.compile(r'(?<!\S)(in|type|under|after):(?:"([^"]*)"|(\S+))', re.IGNORECASE)
_TYPES = {t.value for t in ItemType}


@dataclass(frozen=True)
class ParsedQuery:
    text: str  # the query without its scope and filter words
    bases: tuple[str, ...] = ()  # `in:` values; ("all",) for every base
    types: tuple[str, ...] = ()
    under: str | None = None
    after: str | None = None
    problems: tuple[str, ...] = field(default=())  # a word that cannot be used, and why

    @property
    def every_base(self) -> bool:
        return any(b.casefold() == "all" for b in self.bases)

    @property
    def several(self) -> bool:
        """Search through `search_bases` (results from more than the selected base)."""
        return bool(self.bases)

    def filters(self) -> dict[str, object] | None:
        found: dict[str, object] = {}
        if self.types:
            found["item_types"] = list(self.types)
        if self.under:
            found["source_prefix"] = self.under
        if self.after:
            found["modified_after"] = self.after
        return found or None

    def describe(self) -> str:
        """`in all bases · type file · under ~/notes` for the status line (empty if none)."""
        parts = []
        if self.every_base:
            parts.append("in all bases")
        elif self.bases:
            parts.append("in " + ", ".join(self.bases))
        if self.types:
            parts.append("type " + ", ".join(self.types))
        if self.under:
            parts.append("under " + self.under)
        if self.after:
            parts.append("after " + self.after)
        return " · ".join(parts)


def parse_query(raw: str) -> ParsedQuery:
    bases: list[str] = []
    types: list[str] = []
    under: str | None = None
    after: str | None = None
    problems: list[str] = []
    for match in _TOKEN.finditer(raw):
        key = match.group(1).lower()
        value = match.group(2) if match.group(2) is not None else match.group(3)
        if not value.strip():
            problems.append(f"{key}: needs a value")
        elif key == "in":
            bases.append(value)
        elif key == "type":
            for name in value.split(","):
                if name.lower() not in _TYPES:
                    problems.append(f"type:{name} is not one of {', '.join(sorted(_TYPES))}")
                else:
                    types.append(name.lower())
        elif key == "under":
            under = os.path.expanduser(value) if value.startswith("~") else value
        else:
            after = value
    text = " ".join(_TOKEN.sub(" ", raw).split())
    return ParsedQuery(text, tuple(bases), tuple(dict.fromkeys(types)), under, after, tuple(problems))

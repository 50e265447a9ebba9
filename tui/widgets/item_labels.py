"""What one item looks like in a tree line or a list: icon, status mark, name, state.

Names and errors are user/document text: they go through `ktui.tui.text.clean`
(one line, no markup, no escapes) and are cut so a 10,000-character name cannot
make a line expensive to lay out. The full text is in the item's details.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ktui.core.models import ItemPhase, ItemStatus, ItemType, KnowledgeItem
from ktui.tui.text import clean, shorten

NAME_LIMIT = 200  # characters of a name drawn in one line
ERROR_LIMIT = 300  # characters of an error drawn in one line (the details show all of it)

TYPE_ICONS = {
    ItemType.FILE: "📄",
    ItemType.URL: "🌐",
    ItemType.NOTE: "📝",
    ItemType.DIRECTORY: "📁",
    ItemType.SITEMAP: "🧭",
}

STATUS_MARKS = {
    ItemStatus.COMPLETED: ("✔", "green"),
    ItemStatus.FAILED: ("✘", "bold red"),
    ItemStatus.PROCESSING: ("◌", "yellow"),
    ItemStatus.IDLE: ("·", "dim"),
}

STATUS_WORDS = {
    ItemStatus.COMPLETED: "done",
    ItemStatus.FAILED: "failed",
    ItemStatus.PROCESSING: "processing",
    ItemStatus.IDLE: "queued",
}


@dataclass(slots=True)
class ItemNode:
    """What a tree node shows: the item plus its latest live state."""

    item: KnowledgeItem
    status: ItemStatus
    phase: ItemPhase | None
    error: str | None
    progress: float | None = None
    ocr_pages: tuple[int, int] | None = None  # (recognised, to recognise) while OCR reads the file
    loaded: bool = False  # children requested (containers)
    watch: bool = False
    notice: str | None = None  # a service error about this item (e.g. a refused reindex)

    @classmethod
    def of(cls, item: KnowledgeItem) -> ItemNode:
        return cls(item, item.status, item.phase, item.error, watch=bool(getattr(item.data, "watch", False)))


def display_name(item: KnowledgeItem) -> str:
    """The item's name as one safe line."""
    return clean(shorten(item.display_name, NAME_LIMIT), one_line=True)


def short_error(item: KnowledgeItem, error: str | None) -> str:
    """An error for one line: the item's own path shortened to its name, cut at ERROR_LIMIT."""
    if not error:
        return "failed"
    if item.source:
        error = error.replace(item.source, item.display_name)
    return clean(shorten(error, ERROR_LIMIT), one_line=True)


def node_label(node: ItemNode) -> Text:
    """Type icon and status mark first (always visible), then the name, then what is going on."""
    t = Text(no_wrap=True, overflow="ellipsis")
    mark, style = STATUS_MARKS.get(node.status, ("?", ""))
    t.append(TYPE_ICONS.get(node.item.type, "•") + " ")
    t.append(mark + " ", style)
    t.append(display_name(node.item), "bold" if node.item.type.is_container else "")
    if node.watch:
        t.append(" 👁", "dim")
    if node.status == ItemStatus.PROCESSING:
        t.append(f"  {node.phase.value if node.phase else 'processing'}", "yellow")
        if node.progress is not None and node.phase == ItemPhase.EMBEDDING:
            t.append(f" {node.progress * 100:3.0f}%", "bold yellow")
        elif node.ocr_pages is not None and node.phase == ItemPhase.READING:
            done, total = node.ocr_pages
            t.append(f"  OCR {done:,}/{total:,} page{'s' if total != 1 else ''}", "bold yellow")
    elif node.status == ItemStatus.FAILED:
        t.append("  " + short_error(node.item, node.error), "red")
    elif node.status == ItemStatus.IDLE:
        t.append("  queued", "dim")
    if node.notice:
        t.append("  ⚠ " + clean(shorten(node.notice, ERROR_LIMIT), one_line=True), "red")
    return t


def sort_key(item: KnowledgeItem) -> tuple[bool, str, str]:
    """Inside a container: sub-folders first, then by name (stable across runs)."""
    return (not item.type.is_container, item.display_name.casefold(), item.id)

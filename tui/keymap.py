"""Every action of the app, with a stable binding id, a default key and a description.

One table feeds the footer (Textual `Binding`s), the help screen, the command
palette and the user's keymap (`[keymap]` in the settings file maps a binding id
to a key string, applied with `App.set_keymap`), so the four can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True, slots=True)
class Action:
    id: str  # binding id, e.g. "base.new" (what the keymap refers to)
    key: str  # default key (Textual key syntax; comma separates alternatives)
    action: str  # Textual action string
    description: str  # short label (footer, palette)
    help: str  # one line for the help screen and the palette
    show: bool = True  # visible in the footer
    palette: bool = True  # offered in the command palette


APP_ACTIONS: tuple[Action, ...] = (
    Action("app.help", "f1,question_mark", "help", "Help", "Show every key binding"),
    Action("app.quit", "q,ctrl+q", "quit", "Quit", "Quit ktui", palette=False),
    Action("app.search", "slash", "focus_search", "Search", "Focus the search box"),
    Action("app.next_pane", "tab", "app.focus_next", "Next pane", "Move focus to the next pane", show=False,
           palette=False),
    Action("app.prev_pane", "shift+tab", "app.focus_previous", "Previous pane", "Move focus to the previous pane",
           show=False, palette=False),
    Action("app.theme", "ctrl+t", "change_theme", "Theme", "Pick a colour theme", show=False),
    Action("app.refresh", "f5", "refresh", "Refresh", "Reload bases and items from the store", show=False),
    Action("base.new", "n", "new_base", "New", "Create a knowledge base"),
    Action("base.edit", "e", "edit_base", "Edit", "Edit the selected base's settings"),
    Action("base.restore", "R", "restore_base", "Restore", "Rebuild the selected base with another model"),
    Action("base.delete", "D", "delete_base", "Del base", "Delete the selected base and its data",
           show=False),
    Action("item.add", "a", "add_items", "Add", "Add files, folders, URLs, sitemaps or notes"),
    Action("item.delete", "d,delete", "delete_item", "Del", "Delete the item under the cursor"),
    Action("item.reindex", "r", "reindex_item", "Reindex", "Read and embed the item again"),
    Action("item.chunks", "c", "chunks", "Chunks", "Browse (and delete) the item's chunks"),
    Action("item.similar", "s", "similar", "Similar", "Items similar to the one under the cursor"),
    Action("item.watch", "w", "toggle_watch", "Watch", "Follow (or stop following) a top-level folder's changes",
           show=False),
    Action("search.mode", "ctrl+o", "cycle_mode", "Mode", "Cycle the search mode (default, bm25, hybrid)",
           show=False),
)


def bindings(actions: tuple[Action, ...] = APP_ACTIONS) -> list[Binding]:
    return [Binding(a.key, a.action, a.description, show=a.show, id=a.id) for a in actions]


def key_of(action: Action, keymap: Mapping[str, str]) -> str:
    """The key(s) currently bound to an action, after the user's keymap."""
    return keymap.get(action.id, action.key)


def display_key(key: str) -> str:
    names = {"question_mark": "?", "slash": "/", "delete": "Del", "shift+tab": "Shift+Tab"}
    parts = []
    for k in key.split(","):
        k = k.strip()
        parts.append(names.get(k, k.replace("ctrl+", "Ctrl+").replace("shift+", "Shift+")))
    return " / ".join(parts)


def unknown_ids(keymap: Mapping[str, str]) -> list[str]:
    """Binding ids in the user's keymap that no action has (reported, not fatal)."""
    known = {a.id for a in APP_ACTIONS} | set(EXTRA_IDS)
    return sorted(k for k in keymap if k not in known)


EXTRA_IDS = {
    "list.down": "j: cursor down in lists and trees",
    "list.up": "k: cursor up in lists and trees",
    "modal.close": "escape: close a dialog",
    "modal.submit": "ctrl+s: confirm a dialog",
    "confirm.yes": "y: answer yes in a confirmation",
    "confirm.no": "n: answer no in a confirmation",
    "chunks.delete": "d,delete: delete the chunk under the cursor (chunk browser)",
}
"""Binding ids defined on widgets and dialogs (also remappable)."""

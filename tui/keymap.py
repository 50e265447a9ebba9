"""Every key of the app, with a stable binding id, a default key and a description.

One table feeds the footer (Textual `Binding`s), the help screen, the command
palette, the hints written in dialogs and the user's keymap (`[keymap]` in the
settings file maps a binding id to a key string, applied with `App.set_keymap`),
so none of them can disagree. `APP_ACTIONS` are the app's own actions;
`WIDGET_KEYS` are bound on panes and dialogs (`widget_bindings` builds them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from textual.binding import Binding

MOVE = Binding.Group("Move", compact=True)
PANES = Binding.Group("Pane", compact=True)
RESULTS = Binding.Group("Next/prev", compact=True)


@dataclass(frozen=True, slots=True)
class Action:
    id: str  # binding id, e.g. "base.new" (what the keymap refers to)
    key: str  # default key (Textual key syntax; comma separates alternatives)
    action: str  # Textual action string
    description: str  # short label (footer, palette)
    help: str  # one line for the help screen and the palette
    show: bool = True  # visible in the footer
    palette: bool = True  # offered in the command palette
    group: Binding.Group | None = None


# Footer order: what acts on the selection first, then the search, panes, help and quit.
APP_ACTIONS: tuple[Action, ...] = (
    Action("item.add", "a", "add_items", "Add", "Add files, folders, URLs, sitemaps or notes"),
    Action("item.info", "i", "item_info", "Info", "Everything about the item under the cursor"),
    Action("item.delete", "d,delete", "delete_item", "Del", "Delete the item under the cursor"),
    Action("item.reindex", "r", "reindex_item", "Reindex", "Read and embed the item again"),
    Action("item.chunks", "c", "chunks", "Chunks", "Browse (and delete) the item's chunks"),
    Action("item.similar", "s", "similar", "Similar", "Items similar to the one under the cursor"),
    Action("item.watch", "w", "toggle_watch", "Watch", "Follow (or stop following) a top-level folder's changes"),
    Action("base.new", "n", "new_base", "New", "Create a knowledge base"),
    Action("base.edit", "e", "edit_base", "Edit", "Edit the selected base's settings"),
    Action("base.restore", "R", "restore_base", "Restore", "Rebuild the selected base with another model"),
    Action("base.reindex", "ctrl+r", "reindex_base", "Reindex all",
           "Reindex every item of the selected base (rebuilds a damaged store)"),
    Action("base.delete", "D", "delete_base", "Del base", "Delete the selected base and its data"),
    Action("app.search", "slash", "focus_search", "Search", "Focus the search box"),
    Action("search.mode", "ctrl+o", "cycle_mode", "Mode", "Cycle the search mode (hybrid, vector, bm25)"),
    Action("app.pane_bases", "1", "focus_pane('bases')", "Bases", "Jump to the bases pane", palette=False,
           group=PANES),
    Action("app.pane_items", "2", "focus_pane('items')", "Items", "Jump to the items pane", palette=False,
           group=PANES),
    Action("app.pane_search", "3", "focus_pane('results')", "Results", "Jump to the search results",
           palette=False, group=PANES),
    Action("app.help", "f1,question_mark", "help", "Help", "Show every key binding"),
    Action("app.quit", "q,ctrl+q", "quit", "Quit", "Quit ktui", palette=False),
    Action("app.theme", "ctrl+t", "change_theme", "Theme", "Pick a colour theme (saved in the settings file)"),
    Action("app.refresh", "f5", "refresh", "Refresh", "Reload bases and items from the store"),
    Action("app.next_pane", "tab", "app.focus_next", "Next pane", "Move focus to the next pane or field",
           show=False, palette=False),
    Action("app.prev_pane", "shift+tab", "app.focus_previous", "Previous pane",
           "Move focus to the previous pane or field", show=False, palette=False),
)


@dataclass(frozen=True, slots=True)
class WidgetKey:
    key: str
    action: str
    description: str
    help: str  # where it applies and what it does (help screen)
    show: bool = True
    group: Binding.Group | None = None


WIDGET_KEYS: dict[str, WidgetKey] = {
    "list.down": WidgetKey("j", "cursor_down", "Down", "Cursor down in lists and trees (↓ too)",
                         show=False, group=MOVE),
    "list.up": WidgetKey("k", "cursor_up", "Up", "Cursor up in lists and trees (↑ too)",
                         show=False, group=MOVE),
    "list.top": WidgetKey("g", "first", "Top", "First line of a list or tree (Home too)",
                         show=False, group=MOVE),
    "list.bottom": WidgetKey("G", "last", "Bottom", "Last line of a list or tree (End too)",
                         show=False, group=MOVE),
    "tree.collapse": WidgetKey("h", "collapse", "Collapse", "Collapse the folder, or go to its parent (tree)",
                               show=False, group=MOVE),
    "tree.expand": WidgetKey("l", "expand", "Expand", "Expand the folder (tree)",
                         show=False, group=MOVE),
    "tree.open": WidgetKey("enter", "open", "Open", "Expand/collapse a folder, open an item's details (tree)"),
    "pane.left": WidgetKey("h", "pane_left", "Left", "Pane to the left (bases, results)", show=False),
    "pane.right": WidgetKey("l", "pane_right", "Right", "Pane to the right (bases, results)", show=False),
    "results.open": WidgetKey("enter", "select", "Open", "Open the result in its context (results)"),
    "results.next": WidgetKey("n", "next_result", "Next", "Next result (results)", group=RESULTS),
    "results.prev": WidgetKey("N", "previous_result", "Prev", "Previous result (results)", group=RESULTS),
    "input.leave": WidgetKey("escape", "leave", "Leave", "Leave the search box, back to the results"),
    "modal.close": WidgetKey("escape", "close", "Close", "Close a dialog (nothing is saved)"),
    "modal.submit": WidgetKey("ctrl+s", "submit", "Save", "Confirm a dialog"),
    "confirm.yes": WidgetKey("y", "submit", "Yes", "Answer yes in a confirmation"),
    "confirm.no": WidgetKey("n", "close", "No", "Answer no in a confirmation"),
    "chunks.delete": WidgetKey("d,delete", "delete_chunk", "Delete chunk",
                               "Delete the chunk under the cursor (chunk browser, asks first)"),
    "detail.reindex": WidgetKey("r", "reindex", "Reindex", "Reindex the item (item details)"),
    "add.file": WidgetKey("f2", "tab('file')", "File", "File tab (add dialog)"),
    "add.folder": WidgetKey("f3", "tab('folder')", "Folder", "Folder tab (add dialog)"),
    "add.url": WidgetKey("f4", "tab('url')", "URL", "URL tab (add dialog)"),
    "add.sitemap": WidgetKey("f5", "tab('sitemap')", "Sitemap", "Sitemap tab (add dialog)"),
    "add.note": WidgetKey("f6", "tab('note')", "Note", "Note tab (add dialog)"),
}
"""Binding ids defined on panes and dialogs (remappable like the app's)."""


def bindings(actions: tuple[Action, ...] = APP_ACTIONS) -> list[Binding]:
    return [Binding(a.key, a.action, a.description, show=a.show, id=a.id, group=a.group) for a in actions]


DIALOG_APP_IDS = ("app.help", "app.quit")
"""App keys that also work inside a dialog (a modal screen stops the app's own bindings)."""


def dialog_app_bindings() -> list[Binding]:
    """`F1`/`?` and `q`/`Ctrl+Q` inside dialogs: the app's actions under the app's binding ids,
    so the user's keymap remaps them there too."""
    by_id = {a.id: a for a in APP_ACTIONS}
    return [Binding(by_id[i].key, "app." + by_id[i].action, by_id[i].description, id=i) for i in DIALOG_APP_IDS]


def widget_bindings(ids: Iterable[str], **overrides: dict) -> list[Binding]:
    """Textual bindings for the given widget binding ids (per-id keyword overrides allowed)."""
    out = []
    for binding_id in ids:
        k = WIDGET_KEYS[binding_id]
        kw = {"show": k.show, "group": k.group} | overrides.get(binding_id.replace(".", "_"), {})
        out.append(Binding(k.key, k.action, k.description, id=binding_id, **kw))
    return out


def key_of(action: Action, keymap: Mapping[str, str]) -> str:
    """The key(s) currently bound to an action, after the user's keymap."""
    return keymap.get(action.id, action.key)


def key_for(binding_id: str, keymap: Mapping[str, str]) -> str:
    """The key(s) bound to any binding id (app or widget), after the user's keymap, for display."""
    if binding_id in keymap:
        return display_key(keymap[binding_id])
    for action in APP_ACTIONS:
        if action.id == binding_id:
            return display_key(action.key)
    return display_key(WIDGET_KEYS[binding_id].key)


_KEY_NAMES = {"question_mark": "?", "slash": "/", "delete": "Del", "escape": "Esc", "enter": "Enter",
              "space": "Space", "tab": "Tab", "shift+tab": "Shift+Tab"}


def display_key(key: str) -> str:
    parts = []
    for k in key.split(","):
        k = k.strip()
        name = _KEY_NAMES.get(k)
        if name is None:
            *mods, base = k.split("+")
            base = _KEY_NAMES.get(base, base.upper() if re.fullmatch(r"f\d+", base) or mods else base)
            name = "+".join([m.capitalize() for m in mods] + [base])
        parts.append(name)
    return " / ".join(parts)


def unknown_ids(keymap: Mapping[str, str]) -> list[str]:
    """Binding ids in the user's keymap that no action has (reported, not fatal)."""
    known = {a.id for a in APP_ACTIONS} | set(WIDGET_KEYS)
    return sorted(k for k in keymap if k not in known)

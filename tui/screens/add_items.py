"""Add items: a file or folder picked from a DirectoryTree, a URL, a sitemap, a note.

One tab per item type; Ctrl+S (or the button) adds what the active tab holds.
The dialog only closes when the service accepted the input; a refusal (bad
path, bad URL, empty note) is shown in the dialog, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import (
    DirectoryTree,
    Input,
    Label,
    Static,
    Switch,
    TabbedContent,
    TabPane,
    TextArea,
)

from ktui.core.models import ItemInput
from ktui.tui.keymap import widget_bindings
from ktui.tui.messages import ItemsAccepted
from ktui.tui.screens.common import Dialog, FormDialog
from ktui.tui.text import literal

TABS = ("file", "folder", "url", "sitemap", "note")


class PathPicker(DirectoryTree):
    """A directory tree that picks a path for the text field under it, and hands typing to it.

    A tree consumes no printable key, so a letter typed while it has the focus (as it has when
    the dialog opens and after `F2`/`F3`) would bubble to the dialog's own bindings: `q` quit
    the whole app halfway through typing `/home/quentin`. Every printable key but Space (the
    tree's own: expand) moves the focus to the path field and is delivered there, as if the
    user had pressed Tab first (a picked path is replaced, as Tab selects it). The focus moves
    synchronously, and keys of a burst the terminal delivered at once that were already queued
    here (Space included) follow it there, in order; `check_consume_key` keeps the footer and
    the binding chain from offering `q` meanwhile."""

    def __init__(self, path: Path, *, field: str, id: str) -> None:
        super().__init__(path, id=id)
        self.field = field  # id of the Input the picked path goes to

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return _typed(character)

    def on_key(self, event: events.Key) -> None:
        field = self.screen.query_one(f"#{self.field}", Input)
        handed_over = self.screen.focused is field  # a key of a burst queued here before the focus moved
        if not (handed_over or _typed(event.character)):
            return
        event.stop()
        event.prevent_default()
        if not handed_over:
            self.screen.set_focus(field)  # now: the keys after this one go straight to the field
        field.post_message(events.Key(event.key, event.character))  # queued after its Focus


def _typed(character: str | None) -> bool:
    return character is not None and character.isprintable() and character != " "


class FolderTree(PathPicker):
    """Only folders (hidden ones left out)."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if p.is_dir() and not p.name.startswith(".")]


class FileTree(PathPicker):
    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".")]


FIRST_FIELD = {"file": "#file-tree", "folder": "#folder-tree", "url": "#url-input",
               "sitemap": "#sitemap-input", "note": "#note-text"}  # what a tab focuses when it opens


class AddItemsScreen(FormDialog):
    """dismiss(list[KnowledgeItem]) once accepted, None on cancel."""

    SUBMIT_BUTTON = "add"
    BINDINGS: ClassVar[list[Binding]] = Dialog.BINDINGS + widget_bindings(f"add.{t}" for t in TABS)

    def __init__(self, base_id: str, base_name: str, start_dir: Path, initial_tab: str = "file") -> None:
        super().__init__()
        self.base_id = base_id
        self.base_name = base_name
        self.start_dir = start_dir
        self.initial_tab = initial_tab
        self.active_tab = initial_tab  # the app reopens the dialog on the tab used last

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog add"):
            yield Label(literal(f"Add to “{self.base_name}”", one_line=True), classes="dialog-title")
            with TabbedContent(initial=self.initial_tab, id="tabs"):
                with TabPane(self._tab_title("File", "file"), id="file"):
                    yield FileTree(self.start_dir, field="file-path", id="file-tree")
                    yield Input(placeholder="path of a file (pick above or type)", id="file-path")
                with TabPane(self._tab_title("Folder", "folder"), id="folder"):
                    yield FolderTree(self.start_dir, field="folder-path", id="folder-tree")
                    yield Input(placeholder="path of a folder (pick above or type)", id="folder-path")
                    yield Horizontal(Switch(value=False, id="watch"), Label("Watch for changes"),
                                     classes="switch-row")
                with TabPane(self._tab_title("URL", "url"), id="url"):
                    yield Input(placeholder="https://example.org/page", id="url-input")
                    yield Static("The page is fetched and its main text extracted.", classes="dialog-hint")
                with TabPane(self._tab_title("Sitemap", "sitemap"), id="sitemap"):
                    yield Input(placeholder="https://example.org/sitemap.xml", id="sitemap-input")
                    yield Static("Every page the sitemap lists becomes an item.", classes="dialog-hint")
                with TabPane(self._tab_title("Note", "note"), id="note"):
                    yield TextArea(id="note-text", soft_wrap=True, show_line_numbers=False)
                    yield Input(placeholder="source URL (optional)", id="note-source")
            yield Static("", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield from self.buttons("Add")

    def _tab_title(self, title: str, tab: str) -> Content:
        return literal(f"{title} {self.key(f'add.{tab}')}")

    def action_tab(self, tab: str) -> None:
        """Switch tab with one key (F2 … F6 by default), from any field of the dialog.

        By focusing the tab's first field, not by setting `TabbedContent.active`: set from
        here (the screen's handler), the tabs' own TabActivated escapes the TabbedContent's
        `prevent` and the pane that still held the focus took the tab back, the two
        switching back and forth for seconds (F3 from the file tree ended on the file tab).
        A focused field activates its pane through the TabbedContent itself."""
        if tab in TABS:
            self.query_one(FIRST_FIELD[tab]).focus()

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#file-tree", DirectoryTree).show_root = False  # the folder tab can pick its root

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.active_tab = event.pane.id or self.active_tab
        focus = FIRST_FIELD.get(event.pane.id or "")
        # only when the focus is not in the pane already (a click on the tab): after `F3` it
        # is (the tab follows the focus), and a second focus() queued here would take it
        # back from the path field a key typed right after `F3` had moved it to
        if focus and not (self.focused is not None and event.pane in self.focused.ancestors_with_self):
            self.query_one(focus).focus()

    def on_directory_tree_file_selected(self, event: DirectoryTree.FileSelected) -> None:
        self.query_one("#file-path", Input).value = str(event.path)

    def on_directory_tree_directory_selected(self, event: DirectoryTree.DirectorySelected) -> None:
        if event.control.id == "folder-tree":
            self.query_one("#folder-path", Input).value = str(event.path)

    def build_input(self) -> ItemInput | None:
        tab = self.query_one(TabbedContent).active

        def value(wid: str) -> str:
            return self.query_one(f"#{wid}", Input).value.strip()

        if tab == "file":
            return ItemInput("file", {"path": value("file-path")})
        if tab == "folder":
            return ItemInput("directory", {"path": value("folder-path"),
                                           "watch": self.query_one("#watch", Switch).value})
        if tab == "url":
            return ItemInput("url", {"url": value("url-input")})
        if tab == "sitemap":
            return ItemInput("sitemap", {"url": value("sitemap-input")})
        if tab == "note":
            data = {"content": self.query_one("#note-text", TextArea).text}
            if value("note-source"):
                data["source_url"] = value("note-source")
            return ItemInput("note", data)
        return None

    def action_submit(self) -> None:
        item = self.build_input()
        if item is None:
            return
        self.show_error(None)
        self.run_call(self.ks.add_items(self.base_id, [item]), ItemsAccepted)

    def on_items_accepted(self, message: ItemsAccepted) -> None:
        message.stop()
        if message.error:
            self.show_error(message.error)
        else:
            self.dismiss(message.value)

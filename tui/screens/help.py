"""Every key binding: key (after the user's keymap), binding id, what it does."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label, Static

from ktui.tui.keymap import APP_ACTIONS, EXTRA_IDS, display_key, key_of
from ktui.tui.screens.common import Dialog


class HelpScreen(Dialog):
    def __init__(self, keymap: Mapping[str, str]) -> None:
        super().__init__()
        self.keymap = dict(keymap)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Label("Keys", classes="dialog-title")
            yield DataTable(id="keys", cursor_type="row", zebra_stripes=True)
            yield Static(
                "Remap any key in the settings file: [keymap] section, binding id = \"key\".  "
                "Ctrl+P opens the command palette (every action, themes).  Esc closes.",
                classes="dialog-hint",
            )

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Key", "Action", "Binding id")
        for action in APP_ACTIONS:
            table.add_row(display_key(key_of(action, self.keymap)), action.help, action.id)
        for binding_id, text in EXTRA_IDS.items():
            key, _, what = text.partition(": ")
            table.add_row(display_key(self.keymap.get(binding_id, key)), what, binding_id)
        table.add_row("Ctrl+P", "Command palette", "(textual)")
        table.add_row("Enter / Space", "Open a result / expand a folder", "(textual)")
        table.focus()

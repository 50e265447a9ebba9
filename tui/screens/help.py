"""Every key binding: key (after the user's keymap), binding id, what it does."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label, Static

from ktui.tui.keymap import APP_ACTIONS, WIDGET_KEYS, display_key, key_of
from ktui.tui.screens.common import Dialog
from ktui.tui.text import literal


class HelpScreen(Dialog):
    def __init__(self, keymap: Mapping[str, str]) -> None:
        super().__init__()
        self.keymap = dict(keymap)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Label(literal("Keys"), classes="dialog-title")
            yield DataTable(id="keys", cursor_type="row", zebra_stripes=True)
            yield Static(literal(
                "In the query box: in:all or in:BASE (several bases), type:file, under:PATH, after:DATE.  "
                "Remap any key in the settings file: [keymap] section, binding id = \"key\".  "
                f"Ctrl+P opens the command palette (every action, themes).  {self.key('modal.close')} closes."),
                classes="dialog-hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Key", "Action", "Binding id")
        # cells are Rich Text: a user's key string ("[") is data, never markup
        for action in APP_ACTIONS:
            table.add_row(Text(display_key(key_of(action, self.keymap))), Text(action.help), Text(action.id))
        for binding_id, key in WIDGET_KEYS.items():
            table.add_row(Text(display_key(self.keymap.get(binding_id, key.key))), Text(key.help), Text(binding_id))
        table.add_row(Text("Ctrl+P"), Text("Command palette"), Text("(textual)"))
        table.focus()

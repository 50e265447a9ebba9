"""Confirm a destructive action; dismisses with True or False.

The title and the question usually quote a user's name ("Delete “Team [wiki]”?"):
both are shown literally (`ktui.tui.text`).
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static

from ktui.tui.keymap import widget_bindings
from ktui.tui.screens.common import Dialog
from ktui.tui.text import literal, shorten

MESSAGE_LIMIT = 2000  # characters of the question shown (a 10,000-character name is cut)


class ConfirmScreen(Dialog, inherit_bindings=False):
    # y / n first: the footer shows one key per action, the first bound (Ctrl+S and Esc still work)
    BINDINGS: ClassVar[list[Binding]] = widget_bindings(["confirm.yes", "confirm.no"]) + Dialog.BINDINGS

    def __init__(self, title: str, message: str, confirm_label: str = "Delete") -> None:
        super().__init__()
        self.title_text = title
        self.message = message
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog confirm"):
            yield Label(literal(self.title_text, one_line=True), classes="dialog-title")
            yield Static(literal(shorten(self.message, MESSAGE_LIMIT)), classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button(literal(f"{self.confirm_label} ({self.key('confirm.yes')})"), variant="error",
                             id="yes")
                yield Button(literal(f"Cancel ({self.key('confirm.no')} / {self.key('modal.close')})"), id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_submit(self) -> None:
        self.dismiss(True)

    def action_close(self) -> None:
        self.dismiss(False)

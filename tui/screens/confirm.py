"""Confirm a destructive action; dismisses with True or False."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static

from ktui.tui.screens.common import Dialog


class ConfirmScreen(Dialog):
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("y", "submit", "Yes", id="confirm.yes"),
        Binding("n", "close", "No", id="confirm.no"),
    ]

    def __init__(self, title: str, message: str, confirm_label: str = "Delete") -> None:
        super().__init__()
        self.title_text = title
        self.message = message
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog confirm"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.message, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.confirm_label} (y)", variant="error", id="yes")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_submit(self) -> None:
        self.dismiss(True)

    def action_close(self) -> None:
        self.dismiss(False)

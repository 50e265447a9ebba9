"""Shared pieces of the dialogs: escape closes, Ctrl+S confirms, errors show in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from textual.binding import Binding
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from ktui.core.errors import KnowledgeError, ValidationError

if TYPE_CHECKING:
    from ktui.core.service import KnowledgeService


@dataclass
class Loaded(Message):
    """A dialog's background fetch finished (workers post this, handlers own widgets)."""

    what: str
    value: Any = None
    error: str | None = None


def error_text(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return "\n".join(f"{field}: {msg}" for field, msg in exc.errors.items())
    return str(exc)


class Dialog(ModalScreen):
    """Base dialog: Escape cancels (dismiss(None)), Ctrl+S runs `action_submit`."""

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("escape", "close", "Close", id="modal.close"),
        Binding("ctrl+s", "submit", "Confirm", id="modal.submit"),
    ]

    @property
    def ks(self) -> KnowledgeService:
        return self.app.ks  # type: ignore[attr-defined]

    def action_close(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:  # overridden where there is something to confirm
        pass

    def show_error(self, message: str | None) -> None:
        for widget in self.query(".dialog-error"):
            assert isinstance(widget, Static)
            widget.update(message or "")
            widget.display = bool(message)

    def run_call(self, what: str, coro: Any) -> None:
        """Await a service call in a worker; the outcome arrives as a `Loaded` message."""

        async def call() -> None:
            try:
                value = await coro
            except KnowledgeError as exc:
                self.post_message(Loaded(what, error=error_text(exc)))
            else:
                self.post_message(Loaded(what, value))

        self.run_worker(call(), group=what, exit_on_error=False)


class FormDialog(Dialog):
    """A dialog with a form: its submit button (and, where `SUBMIT_ON_ENTER`, Enter in a
    field) runs `action_submit`; any other button cancels."""

    SUBMIT_BUTTON: ClassVar[str] = "submit"
    SUBMIT_ON_ENTER: ClassVar[bool] = True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == self.SUBMIT_BUTTON:
            self.action_submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.SUBMIT_ON_ENTER:
            event.stop()
            self.action_submit()

"""Shared pieces of the dialogs: Esc closes, Ctrl+S confirms, errors show in place.

Every text a dialog shows goes through `ktui.tui.text` (user text is data, never
markup); every service call runs in a worker whose outcome arrives as one typed
message (`ktui.tui.messages.Outcome` subclasses).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from ktui.core.errors import KnowledgeError, StoreDamagedError, ValidationError
from ktui.tui.host import host_of, key_hint
from ktui.tui.keymap import dialog_app_bindings, widget_bindings
from ktui.tui.messages import Outcome, StoreDamaged
from ktui.tui.text import literal
from ktui.tui.widgets.key_footer import KeyFooter

if TYPE_CHECKING:
    from ktui.core.service import KnowledgeService


def error_text(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return "\n".join(f"{field}: {msg}" for field, msg in exc.errors.items())
    return str(exc)


class Dialog(ModalScreen):
    """Base dialog: Escape cancels (dismiss(None)), Ctrl+S runs `action_submit`.

    A dialog's `on_mount` and its actions query its widgets (`query_one`), which exist only
    once it has composed: `push_screen` puts the screen on the stack at once, but it composes
    and mounts later, on its own loop. So its actions do nothing until it has mounted, and its
    mount handlers do not run at all when the screen was taken down before it mounted (the
    app quitting right after the key that opened it: its widgets are already gone, and the
    help screen's `query_one(DataTable)` raised NoMatches, taking the app down with it)."""

    BINDINGS: ClassVar[list[Binding]] = widget_bindings(["modal.close", "modal.submit"]) + dialog_app_bindings()

    @property
    def ks(self) -> KnowledgeService:
        return host_of(self).ks

    def key(self, binding_id: str) -> str:
        """The key bound to `binding_id` (after the user's keymap), for a hint or a button label."""
        return key_hint(self, binding_id)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Mount) and not self.is_attached:
            return  # pruned before it mounted (the app closing): nothing left to set up
        await super().on_event(event)

    def _on_mount(self) -> None:
        # every dialog lists its own keys (Esc, Ctrl+S, y/n, F2…) in a footer of its own; the main
        # screen's footer behind it would show keys that do nothing while the dialog is open
        self.mount(KeyFooter())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.is_mounted:
            return False  # not composed yet: the actions' widgets do not exist
        if action == "submit" and type(self).action_submit is Dialog.action_submit:
            return False  # nothing to confirm here (details, help, lists): no "Save" in the footer
        return True

    def action_close(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:  # overridden where there is something to confirm
        pass

    def show_error(self, message: str | None) -> None:
        for widget in self.query(".dialog-error"):
            assert isinstance(widget, Static)
            widget.update(literal(message or ""))
            widget.display = bool(message)

    def run_call(self, coro: Awaitable[Any], outcome: type[Outcome], *, group: str | None = None,
                 **fields: Any) -> None:
        """Await a service call in a worker; its outcome arrives as `outcome(value=…)` or
        `outcome(error=…)` (the service's message, naming the field)."""

        async def call() -> None:
            try:
                value = await coro
            except KnowledgeError as exc:
                if isinstance(exc, StoreDamagedError):
                    self.post_message(StoreDamaged())  # bubbles to the app, which reloads the bases
                self.post_message(outcome(error=error_text(exc), **fields))
            else:
                self.post_message(outcome(value=value, **fields))

        self.run_worker(call(), group=group or outcome.__name__, exit_on_error=False)


class FormDialog(Dialog):
    """A dialog with a form: its submit button (and, where `SUBMIT_ON_ENTER`, Enter in a
    field) runs `action_submit`; any other button cancels."""

    SUBMIT_BUTTON: ClassVar[str] = "submit"
    SUBMIT_ON_ENTER: ClassVar[bool] = True

    def buttons(self, submit_label: str) -> tuple[Button, Button]:
        """The dialog's two buttons, their labels naming the keys that do the same."""
        return (Button(literal(f"{submit_label} ({self.key('modal.submit')})"), variant="primary",
                       id=self.SUBMIT_BUTTON),
                Button(literal(f"Cancel ({self.key('modal.close')})"), id="cancel"))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == self.SUBMIT_BUTTON:
            self.action_submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.SUBMIT_ON_ENTER:
            event.stop()
            self.action_submit()

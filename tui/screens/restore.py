"""Restore a base: rebuild it (root items re-indexed) with a model available here."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Select, Static

from ktui.core.models import KnowledgeBase
from ktui.tui.messages import BaseRestored, DimensionsDetected, ModelsListed
from ktui.tui.screens.base_form import model_options
from ktui.tui.screens.common import FormDialog
from ktui.tui.text import literal


class RestoreScreen(FormDialog):
    """dismiss(new KnowledgeBase) after a successful restore, None on cancel."""

    SUBMIT_BUTTON = "restore"
    SUBMIT_ON_ENTER = False

    def __init__(self, base: KnowledgeBase, default_model: str) -> None:
        super().__init__()
        self.base = base
        self.default_model = default_model
        self._probe_serial = 0

    def compose(self) -> ComposeResult:
        b = self.base
        why = (
            "Its embedding model is missing here; pick one that exists to rebuild it."
            if not b.is_usable
            else "Rebuild it with another embedding model (a new base is created, items re-indexed)."
        )
        with Vertical(classes="dialog form restore"):
            yield Label(literal(f"Restore “{b.name}”", one_line=True), classes="dialog-title")
            yield Static(why, classes="dialog-body")
            yield Horizontal(Label("Model", classes="field-label"),
                             Select(model_options([self.default_model]), value=self.default_model,
                                    allow_blank=False, id="model", compact=True), classes="field")
            yield Horizontal(Label("Dimensions", classes="field-label"),
                             Input("", type="integer", placeholder="detected", id="dimensions", compact=True), classes="field")
            yield Horizontal(Label("New name", classes="field-label"),
                             Input("", placeholder=literal(f"{b.name} (restored)", one_line=True).plain, id="name", compact=True), classes="field")
            yield Static("", id="model-note", classes="dialog-hint")
            yield Static("", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield from self.buttons("Restore")

    def on_mount(self) -> None:
        self.show_error(None)
        self.run_call(self.ks.list_embedding_models(), ModelsListed)
        self._probe()

    def _probe(self) -> None:
        model = self.query_one("#model", Select).value
        if isinstance(model, str):
            self._probe_serial += 1
            self.run_call(self.ks.detect_dimensions(model), DimensionsDetected, serial=self._probe_serial)

    def on_select_changed(self, event: Select.Changed) -> None:
        self.query_one("#dimensions", Input).value = ""
        self._probe()

    def on_models_listed(self, message: ModelsListed) -> None:
        message.stop()
        if message.error or message.value is None:
            return
        select = self.query_one("#model", Select)
        current = select.value
        ids = [m.id for m in message.value.models] or [self.default_model]
        with select.prevent(Select.Changed):
            select.set_options(model_options(ids))
            select.value = current if current in ids else ids[0]
        if current not in ids:
            self._probe()

    def on_dimensions_detected(self, message: DimensionsDetected) -> None:
        message.stop()
        if message.serial != self._probe_serial:
            return
        if message.error:
            self.query_one("#model-note", Static).update(literal(f"Dimensions not detected: {message.error}"))
        else:
            self.query_one("#dimensions", Input).value = str(message.value)

    def on_base_restored(self, message: BaseRestored) -> None:
        message.stop()
        if message.error:
            self.show_error(message.error)
        else:
            self.dismiss(message.value)

    def action_submit(self) -> None:
        model = self.query_one("#model", Select).value
        raw = self.query_one("#dimensions", Input).value.strip()
        name = self.query_one("#name", Input).value.strip() or None
        try:
            dims: object = int(raw) if raw else None
        except ValueError:
            dims = raw
        self.show_error(None)
        self.run_call(self.ks.restore_base(self.base.id, model, dims, name), BaseRestored)

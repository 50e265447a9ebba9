"""Create or edit a base: model (from every provider), dimensions, chunking, search, OCR.

The model list and the dimension probe come from the service in workers; the
form stays usable while they load. Validation is the service's: its
ValidationError names the field and is shown under the form, the dialog stays
open so nothing typed is lost.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Label, Select, Static

from ktui.core.models import KnowledgeBase
from ktui.tui.messages import BaseSaved, DimensionsDetected, ModelsListed
from ktui.tui.screens.common import FormDialog
from ktui.tui.search_modes import mode_options
from ktui.tui.text import literal, rich_literal

OCR_CHOICES = [("as in the settings", "settings"), ("on", "on"), ("off", "off")]
"""The base's OCR switch: its own on/off, or the settings' `[ocr]` table (on by default)."""


def ocr_choice(enabled: bool | None) -> str:
    return "settings" if enabled is None else ("on" if enabled else "off")


def model_options(ids: list[str]) -> list[tuple[object, str]]:
    """Select options for model ids (a model id comes from a settings file: data, not markup)."""
    return [(rich_literal(i, one_line=True), i) for i in ids]


def _field(label: str, widget: Any) -> Horizontal:
    """A labelled one-line field: compact inputs, so the whole form fits 80×24."""
    widget.compact = True
    return Horizontal(Label(label, classes="field-label"), widget, classes="field")


class BaseFormScreen(FormDialog):
    """dismiss(KnowledgeBase) after a successful create/update, None on cancel."""

    SUBMIT_BUTTON = "save"

    def __init__(self, base: KnowledgeBase | None = None, group_name: str = "", default_model: str = "") -> None:
        super().__init__()
        self.base = base
        self.group_name = group_name
        self.default_model = default_model
        self._probe_serial = 0

    @property
    def editing(self) -> bool:
        return self.base is not None

    def compose(self) -> ComposeResult:
        b = self.base
        title = literal(f"Edit base “{b.name}”", one_line=True) if b else literal("New knowledge base")
        model_value = b.embedding_model_id if b and b.embedding_model_id else self.default_model
        with Vertical(classes="dialog form"):
            yield Label(title, classes="dialog-title")
            with VerticalScroll():
                yield _field("Name", Input(b.name if b else "", placeholder="e.g. Handbook", id="name"))
                yield _field("Emoji", Input(b.emoji if b else "📁", id="emoji", max_length=8))
                yield _field("Group", Input(self.group_name, placeholder="(none)", id="group"))
                yield _field("Model", Select(model_options([model_value]) if model_value else [],
                                             value=model_value or Select.NULL, id="model",
                                             allow_blank=not model_value, disabled=self.editing))
                yield _field("Dimensions", Input(str(b.dimensions) if b and b.dimensions else "",
                                                 placeholder="detected from the model", type="integer",
                                                 id="dimensions", disabled=self.editing))
                yield _field("Chunk size", Input(str(b.chunk_size) if b else "1024", type="integer",
                                                 id="chunk_size"))
                yield _field("Chunk overlap", Input(str(b.chunk_overlap) if b else "200", type="integer",
                                                    id="chunk_overlap"))
                yield _field("Threshold", Input("" if not b or b.threshold is None else str(b.threshold),
                                                placeholder="0..1, blank = none", type="number", id="threshold"))
                yield _field("Top-K", Input(str(b.document_count) if b and b.document_count else "",
                                            placeholder="10", type="integer", id="document_count"))
                yield _field("Search mode", Select(mode_options(), value=b.search_mode.value if b else "hybrid",
                                                   allow_blank=False, id="search_mode"))
                yield _field("Hybrid alpha", Input("" if not b or b.hybrid_alpha is None else str(b.hybrid_alpha),
                                                   placeholder="0.5", type="number", id="hybrid_alpha"))
                yield _field("Rerank model", Input(b.rerank_model_id or "" if b else "",
                                                   placeholder="provider::model, blank = none", id="rerank"))
                yield _field("OCR", Select(OCR_CHOICES, value=ocr_choice(b.ocr_enabled if b else None),
                                           allow_blank=False, id="ocr_enabled"))
                yield _field("OCR languages", Input(b.ocr_languages or "" if b else "",
                                                    placeholder="eng+deu, blank = the settings'", id="ocr_languages"))
                yield _field("OCR max pages", Input(str(b.ocr_max_pages) if b and b.ocr_max_pages else "",
                                                    placeholder="per file, blank = the settings' (500)",
                                                    type="integer", id="ocr_max_pages"))
                yield Static("", id="model-note", classes="dialog-hint")
            yield Static("", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield from self.buttons("Save")

    def on_mount(self) -> None:
        self.show_error(None)
        self.query_one("#name", Input).focus()
        if not self.editing:
            self.run_call(self.ks.list_embedding_models(), ModelsListed)

    # --- background results ------------------------------------------------

    def on_models_listed(self, message: ModelsListed) -> None:
        message.stop()
        select = self.query_one("#model", Select)
        note = self.query_one("#model-note", Static)
        if message.error or message.value is None:
            note.update(literal(f"Models could not be listed: {message.error}"))
            return
        listing = message.value
        current = select.value
        ids = [m.id for m in listing.models]
        if isinstance(current, str) and current not in ids:
            ids.insert(0, current)
        select.set_options(model_options(ids))
        if isinstance(current, str):
            select.value = current
        elif ids:
            select.value = ids[0]
        if listing.errors:
            note.update(literal("Unavailable: " + "; ".join(f"{p}: {e}" for p, e in sorted(listing.errors.items()))))
        self._probe()

    def on_dimensions_detected(self, message: DimensionsDetected) -> None:
        message.stop()
        if message.serial != self._probe_serial:
            return
        note = self.query_one("#model-note", Static)
        if message.error:
            note.update(literal(f"Dimensions not detected: {message.error}"))
        else:
            self.query_one("#dimensions", Input).value = str(message.value)
            note.update(literal(f"Detected {message.value} dimensions."))

    def on_base_saved(self, message: BaseSaved) -> None:
        message.stop()
        if message.error:
            self.show_error(message.error)
        else:
            self.dismiss(message.value)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "model" and not self.editing:
            self.query_one("#dimensions", Input).value = ""
            self._probe()

    def _probe(self) -> None:
        model = self.query_one("#model", Select).value
        if isinstance(model, str) and not self.editing:
            self._probe_serial += 1
            self.run_call(self.ks.detect_dimensions(model), DimensionsDetected, serial=self._probe_serial)

    # --- submit --------------------------------------------------------------

    def _value(self, wid: str) -> str:
        return self.query_one(f"#{wid}", Input).value.strip()

    def _number(self, wid: str, kind: type) -> Any:
        raw = self._value(wid)
        if not raw:
            return None
        try:
            return kind(raw)
        except ValueError:
            return raw  # the service names the field

    def collect(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "name": self._value("name"),
            "emoji": self._value("emoji") or "📁",
            "chunk_size": self._number("chunk_size", int),
            "chunk_overlap": self._number("chunk_overlap", int),
            "threshold": self._number("threshold", float),
            "document_count": self._number("document_count", int),
            "search_mode": self.query_one("#search_mode", Select).value,
            "rerank_model_id": self._value("rerank") or None,
            "ocr_enabled": {"on": True, "off": False}.get(str(self.query_one("#ocr_enabled", Select).value)),
            "ocr_languages": self._value("ocr_languages") or None,
            "ocr_max_pages": self._number("ocr_max_pages", int),
        }
        alpha = self._number("hybrid_alpha", float)
        if config["search_mode"] == "hybrid":
            config["hybrid_alpha"] = alpha
        else:
            config["hybrid_alpha"] = None
        for key in ("chunk_size", "chunk_overlap"):
            if config[key] is None:
                del config[key]
        return config

    def action_submit(self) -> None:
        config = self.collect()
        group = self._value("group")
        self.show_error(None)
        if self.editing:
            assert self.base is not None
            self.run_call(self._update(self.base.id, config, group), BaseSaved)
        else:
            model = self.query_one("#model", Select).value
            dims = self._number("dimensions", int)
            self.run_call(self._create(config, group, model if isinstance(model, str) else None, dims), BaseSaved)

    async def _create(self, config: dict[str, Any], group: str, model: str | None, dims: Any) -> KnowledgeBase:
        # the facade finds or creates the group with the base, so a refused base leaves no group
        name = config.pop("name")
        config = {k: v for k, v in config.items() if v is not None}
        return await self.ks.create_base(name, model, dims, group_name=group or None, **config)

    async def _update(self, base_id: str, config: dict[str, Any], group: str) -> KnowledgeBase:
        if group:
            config["group_name"] = group
        else:
            config["group_id"] = None
        return await self.ks.update_base(base_id, config)

"""The footer: the keys that work on this screen, fitted to the terminal's width.

Textual's `Footer` lays every binding out in one row and lets the row run off
the edge, so at 80 columns the last entries were cut mid-word ("R R▏") and the
help key, which lists the rest, was the first to go. This footer computes each
entry's width before composing, keeps whole entries in binding order while they
fit, and always keeps the help entry (renamed "All keys" when something had to
be left out), so what is shown is always readable and the rest is one key away.
Every screen has one: the main screen and each dialog (`Dialog` mounts it), so a
dialog's own keys (Esc, Ctrl+S, y/n, F2…) are in its footer.

It is built on Textual's public API only (`Widget`, `Horizontal`, `HorizontalGroup`,
`Static`, the screen's `active_bindings` and `bindings_updated_signal`), styled with the
theme's `$footer-*` variables like Textual's own footer in its compact form. Keys and
descriptions are rendered as literal text: a description from the keymap is never markup.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, HorizontalGroup
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

HELP_ACTIONS = ("help", "app.help")  # the app's, and the same key inside a dialog
TRUNCATED_HELP = "All keys"


class FooterEntry(Widget):
    """One key of the footer: its key and description (literal text); a click presses the key."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"footer-entry--key", "footer-entry--description"}
    DEFAULT_CSS = """
    FooterEntry {
        width: auto;
        height: 1;
        margin: 0 1 0 0;
        text-wrap: nowrap;
        background: $footer-item-background;
        .footer-entry--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-entry--description {
            padding: 0 0 0 1;
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        &:hover {
            pointer: pointer;
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        &.-disabled {
            text-style: dim;
        }
    }
    """

    def __init__(self, key: str, key_display: str, description: str, action: str, *, enabled: bool = True,
                 tooltip: str = "", classes: str = "") -> None:
        super().__init__(classes=classes)
        self.key = key
        self.key_display = key_display
        self.description = description
        self.action = action
        self.enabled = enabled
        self.set_class(not enabled, "-disabled")
        self.set_reactive(Widget.shrink, False)  # an entry is whole or not there (the footer fits them)
        if tooltip:
            self.tooltip = tooltip

    def render(self) -> Text:
        # rich Text from plain strings: nothing in a key or a description is read as markup
        key_padding = self.get_component_styles("footer-entry--key").padding
        parts = [(" " * key_padding.left + self.key_display + " " * key_padding.right,
                  self.get_component_rich_style("footer-entry--key"))]
        if self.description:
            padding = self.get_component_styles("footer-entry--description").padding
            parts.append((" " * padding.left + self.description + " " * padding.right,
                          self.get_component_rich_style("footer-entry--description")))
        text = Text.assemble(*parts)
        text.stylize_before(self.rich_style)
        return text

    def on_mouse_down(self) -> None:
        if self.enabled:
            self.app.simulate_key(self.key)  # exactly what pressing it does (the binding decides)
        else:
            self.app.bell()


class FooterGroup(HorizontalGroup):
    """Keys sharing one label (`Binding.Group`): "1 2 3 Pane"."""

    DEFAULT_CSS = """
    FooterGroup {
        width: auto;
        FooterEntry.-grouped {
            margin: 0 1 0 0;
        }
    }
    """


class FooterLabel(Static):
    """A group's label, literal text."""

    DEFAULT_CSS = """
    FooterLabel {
        width: auto;
        height: 1;
        margin: 0 1 0 0;
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    """

    def __init__(self, text: str) -> None:
        super().__init__(Content(text))  # Content: plain text, never markup


@dataclass
class _Entry:
    """One footer entry: a key with its description, or a group of keys sharing one label."""

    bindings: list[tuple[Binding, bool, str]]
    group: Binding.Group | None
    width: int
    displays: list[str] = field(default_factory=list)

    @property
    def action(self) -> str:
        return self.bindings[0][0].action


class KeyFooter(Horizontal, can_focus=False, can_focus_children=False):
    """A compact footer that never cuts an entry (see the module docstring)."""

    ALLOW_SELECT = False
    DEFAULT_CSS = """
    KeyFooter {
        width: 1fr;
        height: 1;
        dock: bottom;
        color: $footer-foreground;
        background: $footer-background;
        FooterEntry.-command-palette {
            dock: right;
            border-left: vkey $foreground 20%;
        }
    }
    """

    def __init__(self, *, show_command_palette: bool = True) -> None:
        super().__init__()
        self.show_command_palette = show_command_palette
        self._bindings_ready = False  # the screen has published its bindings once
        self._composed_width = -1
        self._composed_signature: tuple = ()
        self.shown_actions: list[str] = []  # what the last compose kept (for tests)
        self.left_out: list[str] = []  # what did not fit

    def _entries(self) -> Iterator[_Entry]:
        by_action: defaultdict[str, list[tuple[Binding, bool, str]]] = defaultdict(list)
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                by_action[binding.action].append((binding, enabled, tooltip))
        for group, runs in groupby(by_action.values(), lambda bs: bs[0][0].group):
            multi = list(runs)
            if group is not None and len(multi) > 1:
                displays = [self.app.get_key_display(bs[0][0]) for bs in multi]
                # each key and its margin, then the label and its margin
                width = sum(cell_len(d) + 1 for d in displays) + cell_len(group.description) + 1
                yield _Entry([bs[0] for bs in multi], group, width, displays)
            else:
                for bs in multi:
                    display = self.app.get_key_display(bs[0][0])
                    width = cell_len(display) + 1 + cell_len(bs[0][0].description) + 1  # key, space, text, margin
                    yield _Entry([bs[0]], None, width, [display])

    def _palette(self):
        if not (self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE):
            return None
        return self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        width = self.app.size.width
        self._composed_width = width
        self._composed_signature = self._signature()
        palette = self._palette()
        budget = width
        if palette is not None:
            _, binding, _, _ = palette
            budget -= 1 + cell_len(self.app.get_key_display(binding)) + 1 + cell_len(binding.description)
        entries = list(self._entries())
        help_entry = next((e for e in entries if e.action in HELP_ACTIONS), None)
        kept: list[_Entry] = []
        dropped: list[_Entry] = []
        used = 0  # room kept for the help entry, under its longer name
        if help_entry is not None:
            help_name = cell_len(help_entry.bindings[0][0].description)
            used = help_entry.width + max(0, cell_len(TRUNCATED_HELP) - help_name)
        for entry in entries:
            if entry is help_entry:
                continue
            if not dropped and used + entry.width <= budget:
                kept.append(entry)
                used += entry.width
            else:
                dropped.append(entry)  # once one is left out, the rest are too: order is priority
        if help_entry is not None:
            kept.append(help_entry)
        self.shown_actions = [e.action for e in kept]
        self.left_out = [e.action for e in dropped]
        for entry in kept:
            if entry.group is not None:
                with FooterGroup():
                    for (binding, enabled, tooltip), display in zip(entry.bindings, entry.displays, strict=True):
                        yield FooterEntry(binding.key, display, "", binding.action, enabled=enabled,
                                          tooltip=tooltip or binding.description, classes="-grouped")
                yield FooterLabel(entry.group.description)
                continue
            binding, enabled, tooltip = entry.bindings[0]
            description = binding.description
            if entry is help_entry and dropped:
                description = TRUNCATED_HELP
            yield FooterEntry(binding.key, entry.displays[0], description, binding.action, enabled=enabled,
                              tooltip=tooltip)
        if palette is not None:
            _, binding, enabled, tooltip = palette
            yield FooterEntry(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                              enabled=enabled, tooltip=binding.tooltip or binding.description,
                              classes="-command-palette")

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        # a footer mounted after the screen published its bindings would wait for the next
        # update: compose now
        self._bindings_ready = True
        self.call_after_refresh(self.recompose)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self.call_after_refresh(self.recompose)

    def _signature(self) -> tuple:
        return self.app.size.width, tuple((e.action, tuple(b[1] for b in e.bindings)) for e in self._entries())

    @property
    def settled(self) -> bool:
        """The entries shown are those of the bindings active now (no recompose pending)."""
        return self._bindings_ready and self._composed_signature == self._signature()

    def on_resize(self, event: events.Resize) -> None:
        if self._bindings_ready and self.app.size.width != self._composed_width:
            self.call_after_refresh(self.recompose)

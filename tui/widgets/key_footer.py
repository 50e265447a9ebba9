"""The footer: the keys that work on this screen, fitted to the terminal's width.

Textual's `Footer` lays every binding out in one row and lets the row run off
the edge, so at 80 columns the last entries were cut mid-word ("R R▏") and the
help key, which lists the rest, was the first to go. This footer computes each
entry's width before composing, keeps whole entries in binding order while they
fit, and always keeps the help entry (renamed "All keys" when something had to
be left out), so what is shown is always readable and the rest is one key away.
Every screen has one: the main screen and each dialog (`Dialog` mounts it), so a
dialog's own keys (Esc, Ctrl+S, y/n, F2…) are in its footer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup  # Footer's own parts (not re-exported)

HELP_ACTIONS = ("help", "app.help")  # the app's, and the same key inside a dialog
TRUNCATED_HELP = "All keys"


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


class KeyFooter(Footer):
    """A compact footer that never cuts an entry (see the module docstring)."""

    DEFAULT_CSS = """
    KeyFooter.-compact FooterLabel {
        margin: 0 1 0 0;
    }
    KeyFooter KeyGroup.-compact {
        margin: 0;
        padding: 0;
    }
    KeyFooter KeyGroup.-compact FooterKey.-grouped {
        margin: 0 1 0 0;  /* "1 2 3 Pane", not "123 Pane" */
    }
    """

    def __init__(self, **kw) -> None:
        super().__init__(compact=True, **kw)
        self._composed_width = -1
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
                with KeyGroup(classes="-compact" if entry.group.compact else ""):
                    for (binding, enabled, tooltip), display in zip(entry.bindings, entry.displays, strict=True):
                        yield FooterKey(binding.key, display, "", binding.action, disabled=not enabled,
                                        tooltip=tooltip or binding.description,
                                        classes="-grouped").data_bind(compact=Footer.compact)
                yield FooterLabel(entry.group.description)
                continue
            binding, enabled, tooltip = entry.bindings[0]
            description = binding.description
            if entry is help_entry and dropped:
                description = TRUNCATED_HELP
            yield FooterKey(binding.key, entry.displays[0], description, binding.action, disabled=not enabled,
                            tooltip=tooltip).data_bind(compact=Footer.compact)
        if palette is not None:
            _, binding, enabled, tooltip = palette
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                            classes="-command-palette", disabled=not enabled,
                            tooltip=binding.tooltip or binding.description)

    def on_mount(self) -> None:
        # Footer subscribes to the screen's binding updates (its own on_mount runs too); a footer
        # mounted after the screen set its focus would wait for the next update: compose now
        self._bindings_ready = True
        self.call_after_refresh(self.recompose)

    def _signature(self) -> tuple:
        return self.app.size.width, tuple((e.action, tuple(b[1] for b in e.bindings)) for e in self._entries())

    @property
    def settled(self) -> bool:
        """The entries shown are those of the bindings active now (no recompose pending)."""
        return self._bindings_ready and self._composed_signature == self._signature()

    _composed_signature: tuple = ()

    def on_resize(self, event: events.Resize) -> None:
        if self._bindings_ready and self.app.size.width != self._composed_width:
            self.call_after_refresh(self.recompose)

"""The footer lists the keys that work on each screen, whole, at any width; dialogs have their own.

Pilot tests against a real service: the footer's entries must lie inside the terminal
(none cut mid-word), the help key is always there (named "All keys" when entries had to
be left out), the watch key shows on a top-level folder even at 80 columns, and inside a
dialog the footer shows the dialog's keys, F1 opens the help and q quits.
"""

from __future__ import annotations

import pytest
from textual.app import App
from textual.binding import Binding

from ktui.core.models import ItemInput
from ktui.tui.app import KtuiApp
from ktui.tui.screens.base_form import BaseFormScreen
from ktui.tui.screens.confirm import ConfirmScreen
from ktui.tui.screens.help import HelpScreen
from ktui.tui.widgets.key_footer import TRUNCATED_HELP, FooterEntry, FooterLabel, KeyFooter
from tests.tui.conftest import MODEL, until


async def _folder_base(app: KtuiApp, pilot, docs) -> None:
    await until(lambda: app.ready, pilot, what="service open")
    base = await app.ks.create_base("Orchard", MODEL, None)
    app._select_base(base)
    await until(lambda: app.item_tree.base_id == base.id, pilot, what="base selected")
    await app.ks.add_items(base.id, [ItemInput("directory", {"path": str(docs)})])
    await until(lambda: app.item_tree.nodes_by_id, pilot, what="folder listed")
    app.item_tree.focus()
    app.item_tree.cursor_line = 0


def _footer(app: KtuiApp) -> KeyFooter:
    return app.screen.query_one(KeyFooter)


def _entries_fit(app: KtuiApp, width: int) -> bool:
    footer = _footer(app)
    keys = list(footer.query(FooterEntry))
    palette = [k for k in keys if k.has_class("-command-palette")]
    limit = palette[0].region.x if palette else width
    return bool(keys) and all(k.region.width > 0 and k.region.right <= limit
                              for k in keys if not k.has_class("-command-palette"))


@pytest.mark.parametrize("width", [80, 120, 200])
async def test_the_footer_keeps_whole_entries_and_the_help_key(settings, docs, width):
    app = KtuiApp(settings)
    async with app.run_test(size=(width, 24)) as pilot:
        await _folder_base(app, pilot, docs)
        await until(lambda: "toggle_watch" in _footer(app).shown_actions + _footer(app).left_out, pilot,
                    what="the folder's keys in the footer")
        await pilot.pause()
        footer = _footer(app)
        assert "toggle_watch" in footer.shown_actions, "w works on a top-level folder: it is in the footer"
        assert footer.shown_actions[-1] == "help"
        assert _entries_fit(app, width), "an entry runs past the edge (or under the palette key)"
        help_key = next(k for k in footer.query(FooterEntry) if k.action == "help")
        if footer.left_out:
            assert help_key.description == TRUNCATED_HELP  # F1 lists the keys that are not shown
        if width >= 200:
            assert footer.left_out == []


async def test_dialogs_show_their_own_keys_and_f1_and_q_work_inside(settings, docs):
    app = KtuiApp(settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await _folder_base(app, pilot, docs)
        await pilot.press("e")
        await until(lambda: isinstance(app.screen, BaseFormScreen), pilot, what="edit dialog")
        await until(lambda: {"close", "submit", "app.help"} <= set(_footer(app).shown_actions), pilot,
                    what="the dialog's keys in its footer")
        assert "add_items" not in _footer(app).shown_actions  # the main screen's keys do not work here
        assert _entries_fit(app, 80)
        await pilot.press("f1")  # from inside a dialog, while a field has the focus
        await until(lambda: isinstance(app.screen, HelpScreen), pilot, what="help over the dialog")
        assert "app.help" not in _footer(app).shown_actions  # already open
        await pilot.press("escape", "escape")
        await until(lambda: len(app.screen_stack) == 1, pilot, what="dialogs closed")
        await pilot.press("d")  # a confirmation: y / n, not "Save"
        await until(lambda: isinstance(app.screen, ConfirmScreen), pilot, what="confirmation")
        await until(lambda: _footer(app).shown_actions[:2] == ["submit", "close"], pilot, what="y / n shown")
        labels = {k.action: (k.key, k.description) for k in _footer(app).query(FooterEntry)}
        assert labels["submit"] == ("y", "Yes") and labels["close"] == ("n", "No")
        await pilot.press("q")  # no field to type in: q quits, as in the footer
        await until(lambda: not app.is_running or app.return_code is not None, pilot, what="quit")


class _MarkupKeysApp(App):
    """Descriptions and a group label that look like markup, and a key whose action counts clicks."""

    BINDINGS = [
        Binding("x", "count", "[b]bold[/b] [@click=app.quit]quit"),
        Binding("1", "noop", "one", group=Binding.Group("[red]Pane", compact=True)),
        Binding("2", "noop(2)", "two", group=Binding.Group("[red]Pane", compact=True)),
        Binding("f1", "help", "Help"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.counted = 0

    def compose(self):
        yield KeyFooter()

    def action_count(self) -> None:
        self.counted += 1

    def action_noop(self, _which: int = 1) -> None:
        pass

    def action_help(self) -> None:
        pass


async def test_footer_text_is_literal_and_a_click_runs_the_key():
    app = _MarkupKeysApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.query_one(KeyFooter).settled and app.query(FooterEntry), pilot, what="footer")
        footer = app.query_one(KeyFooter)
        entry = next(e for e in footer.query(FooterEntry) if e.key == "x")
        assert entry.render().plain == "x [b]bold[/b] [@click=app.quit]quit"  # shown as typed, never markup
        assert str(footer.query_one(FooterLabel).render()) == "[red]Pane"
        await pilot.click(entry)
        await until(lambda: app.counted == 1, pilot, what="the click ran the key's action")
        assert app.is_running  # the [@click=app.quit] in the text did nothing

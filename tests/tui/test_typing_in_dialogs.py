"""Text typed into a dialog's field is text: it never reaches the app's or the dialog's keys.

QA found that after `F3` in the add dialog (Folder tab) typing a path with a `q` in it quit
the whole app: `F3` focuses the folder picker (a tree, which consumes no letter), so every
letter bubbled to the dialog's `q` (quit) binding. Each case opens a dialog as a user would,
reaches a field with the keys a user would press, types a text made of the app's own keys
(`q` quit, `j`/`k` move, `/` search, `?` help, `n` new base, `d` delete, `a` add, `y` yes, …)
and checks that the app still runs, the dialog is still open and the field holds exactly
that text. A second test delivers the keys as one burst, as a terminal does for fast typing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual import events
from textual.keys import _character_to_key
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, TextArea

from ktui.tui.app import KtuiApp
from ktui.tui.screens.add_items import AddItemsScreen
from ktui.tui.screens.base_form import BaseFormScreen
from ktui.tui.screens.restore import RestoreScreen
from tests.tui.conftest import until
from tests.tui.test_flows import SIZE, started, with_base

TYPED = "qjk/?QdnyrawgG1h:l~x y/q"  # every key here is bound somewhere in the app or a dialog

# (keys that open the dialog, keys that reach the field, the dialog's type, the field's id)
CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...], type[Screen], str]] = {
    "add-folder (F3)": (("a",), ("f3",), AddItemsScreen, "folder-path"),
    "add-file (F2)": (("a",), ("f2",), AddItemsScreen, "file-path"),
    "add-file (as opened)": (("a",), (), AddItemsScreen, "file-path"),
    "add-url (F4)": (("a",), ("f4",), AddItemsScreen, "url-input"),
    "add-sitemap (F5)": (("a",), ("f5",), AddItemsScreen, "sitemap-input"),
    "add-note (F6)": (("a",), ("f6",), AddItemsScreen, "note-text"),
    "add-note source (F6 Tab)": (("a",), ("f6", "tab"), AddItemsScreen, "note-source"),
    "new base": (("n",), (), BaseFormScreen, "name"),
    "edit base": (("e",), (), BaseFormScreen, "name"),
    "edit base group": (("e",), ("tab", "tab"), BaseFormScreen, "group"),
    "restore base": (("R",), ("tab", "tab"), RestoreScreen, "name"),
}


def text_of(widget: Widget) -> str:
    if isinstance(widget, TextArea):
        return widget.text
    assert isinstance(widget, Input)
    return widget.value


async def open_field(app: KtuiApp, pilot, case: str) -> tuple[Screen, Widget]:
    opening, reaching, dialog, field_id = CASES[case]
    await started(app, pilot)
    await with_base(app, pilot)
    await pilot.press(*opening)
    await until(lambda: isinstance(app.screen, dialog), pilot, timeout=10, what=f"{dialog.__name__} open")
    screen = app.screen
    await pilot.pause()
    for key in reaching:
        await pilot.press(key)
        await pilot.pause()
    return screen, screen.query_one(f"#{field_id}")


def still_typing(app: KtuiApp, screen: Screen, field: Widget, expected: str) -> Callable[[], bool]:
    return lambda: app.is_running and app.screen is screen and text_of(field) == expected


@pytest.mark.parametrize("case", list(CASES))
async def test_keys_typed_in_a_dialog_field_are_text(settings, docs, case):
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:
        screen, field = await open_field(app, pilot, case)
        await pilot.press(*TYPED)
        await pilot.pause()
        assert app.is_running and app.return_code is None, "a typed key quit the app"
        assert app.screen is screen, f"a typed key left the dialog for {app.screen!r}"
        assert text_of(field) == TYPED
        assert app.focused is field


async def test_a_burst_of_keys_after_f3_lands_in_the_folder_field_in_order(settings, docs):
    """A terminal delivers fast typing as several keys at once: the first one lands on the
    folder picker and moves the focus, the rest must follow it into the field, in order."""
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:
        screen, field = await open_field(app, pilot, "add-folder (F3)")
        assert app.focused is not field  # F3 focuses the picker; the burst starts there
        for char in TYPED:
            key = char if char.isalnum() else _character_to_key(char)
            app.post_message(events.Key(key, char))
        await until(lambda: len(text_of(field)) >= len(TYPED) or not app.is_running, pilot, timeout=10,
                    what="the burst typed")
        assert still_typing(app, screen, field, TYPED)(), (text_of(field), app.focused)

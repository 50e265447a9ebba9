"""Keys delivered in one burst, as a terminal delivers a paste or fast typing: each key is
sent through the app's driver (`app._driver.send_message`, what the terminal driver does for
every key it reads) without waiting in between, so the app takes them off its queue
back to back, whatever the keys before them have opened or closed.

QA found that `a F3 q` (open the add dialog, its Folder tab, type `q`) quit the app: the
keys after `a` were forwarded before the dialog had opened, mounted and focused a widget,
so `q` reached the dialog's quit; `a F3 / t m p` left the letters nowhere (File tab, empty
field); `F3 q` with the dialog up typed the `q` into the File tab's field. Every key of a
burst must act where the keys before it left the focus (`ktui.tui.typeahead`).

QA also found that a burst opening a dialog and quitting right away (`q ?`, the app quitting
while `?` pushes the help screen) crashed the app: the help screen's mount queried a table
the app's shutdown had already removed (NoMatches, exit code 1).
"""

from __future__ import annotations

import pytest
from textual import events
from textual.keys import _character_to_key
from textual.widgets import Input

from ktui.tui.app import KtuiApp
from ktui.tui.screens.add_items import AddItemsScreen
from ktui.tui.screens.help import HelpScreen
from tests.tui.conftest import until
from tests.tui.test_flows import SIZE, started, with_base


def burst(app: KtuiApp, keys: list[str]) -> None:
    """Send `keys` through the driver in one go ("f3", "ctrl+q": key names; one character: typed)."""
    assert app._driver is not None
    for key in keys:
        if len(key) == 1:
            event = events.Key(key if key.isalnum() else _character_to_key(key), key)
        else:
            event = events.Key(key, None)
        event.set_sender(app)
        app._driver.send_message(event)


async def settle(pilot, turns: int = 20) -> None:
    """Let the burst run its course (no deadline: the app keeps running meanwhile)."""
    for _ in range(turns):
        await pilot.pause(0.02)


@pytest.mark.parametrize("keys", [["q", "?"], ["ctrl+q", "?"], ["q", "n"], ["q", "e"], ["q", "R"],
                                  ["q", "?", "a"]], ids=" ".join)
async def test_quitting_while_a_dialog_opens_exits_cleanly(settings, docs, keys):
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:  # re-raises an exception the app died of
        await started(app, pilot)
        await with_base(app, pilot)
        burst(app, keys)
        await settle(pilot)
    assert app.return_code == 0, "the app did not leave through its quit"


# (the burst, from the main screen, what the folder field must hold)
TYPED_AFTER_F3 = {
    "a F3 q": (["a", "f3", "q"], "q"),
    "a F3 q j k / ? x": (["a", "f3", "q", "j", "k", "/", "?", "x"], "qjk/?x"),
    "a F3 / t m p": (["a", "f3", "/", "t", "m", "p"], "/tmp"),
}


def folder_field(app: KtuiApp) -> str | None:
    screen = app.screen
    if not isinstance(screen, AddItemsScreen) or not screen.is_mounted:
        return None
    return screen.query_one("#folder-path", Input).value


@pytest.mark.parametrize("case", list(TYPED_AFTER_F3))
@pytest.mark.parametrize("dialog_up", [False, True], ids=["opened by the burst", "already open"])
async def test_a_burst_opening_the_add_dialog_types_into_its_folder_field(settings, docs, case, dialog_up):
    keys, expected = TYPED_AFTER_F3[case]
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await with_base(app, pilot)
        if dialog_up:  # the dialog open and settled first; the burst starts at F3
            await pilot.press(keys[0])
            await until(lambda: folder_field(app) is not None, pilot, timeout=10, what="add dialog open")
            keys = keys[1:]
        burst(app, keys)
        await until(lambda: len(folder_field(app) or "") >= len(expected) or not app.is_running, pilot,
                    timeout=10, what="the burst typed")  # a hang guard: a lost key ends here
        await settle(pilot)
        assert app.is_running and app.return_code is None, "a typed key quit the app"
        screen = app.screen
        assert isinstance(screen, AddItemsScreen), f"the burst ended on {screen!r}"
        assert screen.active_tab == "folder"
        assert screen.query_one("#folder-path", Input).value == expected
        assert screen.query_one("#file-path", Input).value == ""


@pytest.mark.parametrize("keys", [["?", "x"], ["?", "x", "j", "k"], ["?", "escape", "?", "x"]], ids=" ".join)
async def test_a_burst_on_the_help_screen_never_crashes(settings, docs, keys):
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await with_base(app, pilot)
        burst(app, keys)
        await until(lambda: isinstance(app.screen, HelpScreen) and app.screen.is_mounted or not app.is_running,
                    pilot, timeout=10, what="help open")
        await settle(pilot)
        assert app.is_running and app.return_code is None
        assert isinstance(app.screen, HelpScreen)


async def test_q_typed_in_a_burst_on_the_help_screen_quits_cleanly(settings, docs):
    """`q` quits from the help screen (as typed slowly): typed ahead it reaches the help
    screen once it is up and quits through the app's path (exit code 0), no crash."""
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await with_base(app, pilot)
        burst(app, ["?", "x", "q"])
        await settle(pilot)
    assert app.return_code == 0

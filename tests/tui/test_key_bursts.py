"""Keys delivered in one burst, as a terminal delivers a paste or fast typing: each key is
sent through the app's driver (`app._driver.send_message`, what the terminal driver does for
every key it reads) without waiting in between, so the app takes them off its queue
back to back, whatever the keys before them have opened or closed.

QA found that a burst opening a dialog and quitting right away (`q ?`, the app quitting
while `?` pushes the help screen) crashed the app: the help screen's mount queried a table
the app's shutdown had already removed (NoMatches, exit code 1).
"""

from __future__ import annotations

import pytest
from textual import events
from textual.keys import _character_to_key

from ktui.tui.app import KtuiApp
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

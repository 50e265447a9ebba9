"""The add dialog's tab keys (F2 … F6 by default) switch tabs from any field.

They are the only way to reach the Folder, URL, Sitemap and Note tabs from the
keyboard without cycling focus, so each is pressed as a user would, from the field
that has the focus when the dialog opens (the file tree) and from a text field.
"""

from __future__ import annotations

import pytest
from textual.widgets import TabbedContent

from ktui.tui.app import KtuiApp
from ktui.tui.screens.add_items import AddItemsScreen
from tests.tui.test_flows import SIZE, started, with_base


@pytest.mark.parametrize(("key", "tab"), [("f3", "folder"), ("f4", "url"), ("f5", "sitemap"), ("f6", "note")])
async def test_each_tab_key_switches_the_add_dialog_to_its_tab(settings, docs, key, tab):
    app = KtuiApp(settings, start_dir=docs)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await with_base(app, pilot)
        await pilot.press("a")
        assert isinstance(app.screen, AddItemsScreen)
        await pilot.pause()
        await pilot.press(key)
        await pilot.pause()
        assert app.screen.query_one(TabbedContent).active == tab
        await pilot.press("f2")  # and back, from the field the new tab focused
        await pilot.pause()
        assert app.screen.query_one(TabbedContent).active == "file"

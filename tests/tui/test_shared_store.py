"""The TUI on a shared PostgreSQL store: an item another process adds (a real `ktui add`
subprocess, its own data directory) appears in the open TUI's tree and completes there,
through the store's NOTIFY events; nothing polls. And a `Resync` (the store's listener was
away) reloads the bases and the tree."""

from __future__ import annotations

import asyncio

import pytest

from ktui.core.config import StoreSettings
from ktui.core.models import ItemStatus
from ktui.tui.app import KtuiApp
from tests.cli.test_cli import Ktui
from tests.tui.conftest import make_settings, until
from tests.tui.test_flows import SIZE, labels, started, with_base

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_an_item_added_by_another_process_appears_live(tmp_path, embedding_server, postgres_server, pg_schema):
    settings = make_settings(tmp_path / "data", embedding_server).with_(
        store=StoreSettings(url=postgres_server.url, schema=pg_schema))
    elsewhere = Ktui(tmp_path / "elsewhere", embedding_server.url)
    elsewhere.config.write_text(elsewhere.config.read_text(encoding="utf-8") + f'[store]\nschema = "{pg_schema}"\n',
                                encoding="utf-8")
    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot, "Shared")
        assert labels(app) == {}
        add = asyncio.ensure_future(asyncio.to_thread(
            elsewhere, "--store", postgres_server.url, "add", base.id, "--note", "Sea otters hold hands.", "--wait"))
        await until(lambda: len(app.item_tree.nodes_by_id) == 1, pilot, what="the other process's item in the tree")
        await add
        (node,) = app.item_tree.nodes_by_id.values()
        await until(lambda: node.data.status == ItemStatus.COMPLETED, pilot, what="the item completed")
        await until(lambda: app.bases_pane.counts.get(base.id) == 1, pilot, what="the base's item count")
        assert "✔" in next(iter(labels(app).values()))


async def test_a_resync_reloads_the_bases_and_the_tree(settings):
    """Changes no event told about (a shared store's listener was away) show after a Resync."""
    from ktui.core.data.item_writes import ItemWrites
    from ktui.core.data.validation import ValidItem
    from ktui.core.models import ItemType, NoteItemData, Resync

    app = KtuiApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        base = await with_base(app, pilot, "Quiet")
        await ItemWrites(app.ks._db).create_roots(  # below the state writer: no event
            base.id, [ValidItem(ItemType.NOTE, NoteItemData("Unannounced otters.", "note"))], status=ItemStatus.COMPLETED)
        assert labels(app) == {}
        app.ks._bus.publish(Resync("test"))
        await until(lambda: len(labels(app)) == 1, pilot, what="the tree reloaded")
        await until(lambda: app.bases_pane.counts.get(base.id) == 1, pilot, what="the bases reloaded")

"""Fixtures shared by the integration tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_writes import ItemWrites
from tests.support.httpserver import routes, serve


@pytest.fixture(scope="module")
def _site_server():
    table: dict = {}
    with serve(routes(table)) as srv:
        yield srv, table


@pytest.fixture
def site(_site_server) -> SimpleNamespace:
    """A real HTTP server on 127.0.0.1, one per module (starting/stopping one costs ~0.5 s);
    tests fill `site.table` ({path: Response | handler}), which is reset for each test."""
    srv, table = _site_server
    table.clear()
    return SimpleNamespace(url=srv.url, table=table)


@pytest.fixture
def bases(db):
    return BaseWrites(db)  # the data layer's writes (and reads), tested below the state writer


@pytest.fixture
def items(db):
    return ItemWrites(db)

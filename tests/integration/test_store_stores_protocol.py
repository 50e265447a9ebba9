"""Both backends' store managers answer what the runtime, the workflow and the doctor ask
(core/store/protocol.py `Stores`): the same calls, on real SQLite files and a real PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest

from ktui.core.errors import StoreError
from ktui.core.models import Chunk


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request, tmp_path):
    if request.param == "sqlite":
        from ktui.core.store import StoreManager

        manager = StoreManager(tmp_path)
    else:
        from ktui.core.store.postgres import PgStoreManager

        server = request.getfixturevalue("postgres_server")
        manager = PgStoreManager(server.url, schema=request.getfixturevalue("pg_schema"))
    yield manager
    manager.close_all()


def test_the_manager_calls_of_the_runtime_and_the_doctor(stores):
    assert not stores.exists("b1") and stores.get_if_open("b1", 4) is None
    store = stores.create("b1", 4)
    store.replace_items([("i1", [Chunk("otters", {"chunk_index": 0})], np.ones((1, 4), np.float32))])
    assert stores.exists("b1") and stores.get_if_open("b1", 4) is store and stores.get_if_open("b1", 8) is None
    assert stores.problem("b1") is None and "b1" in stores.where_of("b1")
    assert stores.stray_files({"b1"}) == [] and isinstance(stores.drop_matrix("b1"), list)
    stores.rebuild("b1", 4)
    assert stores.get("b1", 4).count() == 0  # an empty store in place of the old one
    assert stores.destroy("b1") == [] and not stores.exists("b1")
    with pytest.raises(StoreError):
        stores.get("b1", 4)

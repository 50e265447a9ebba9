"""`[store] build_memory` reaches PostgreSQL: the settings file's value is the
``maintenance_work_mem`` of the session that builds a base's HNSW index, as PostgreSQL
itself reports it in the middle of the ``CREATE INDEX`` (an event trigger records
``current_setting`` at the command's end). Real PostgreSQL (tests/support/postgres.py)
and a real facade on it; nothing is mocked."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import psycopg
import pytest
from psycopg import sql

from ktui.core.config import load_settings
from ktui.core.models import Chunk
from ktui.core.service import KnowledgeService
from ktui.core.store.postgres import PgStoreManager, PgTuning
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import FAKE_MODEL, fake_settings

pytestmark = pytest.mark.timeout(120)

server = embedding_server_fixture(16, scope="module")


@contextmanager
def recorded_builds(url: str, schema: str) -> Iterator[list[tuple[str, str]]]:
    """(index, maintenance_work_mem) for every index created in `schema` meanwhile, read
    inside the creating session at the end of its CREATE INDEX (filled in on exit).
    The event trigger is database-wide, so it looks only at `schema` and is dropped after."""
    builds: list[tuple[str, str]] = []
    s, trigger = sql.Identifier(schema), sql.Identifier(f"{schema}_builds")
    body = f"""
    DECLARE r record;
    BEGIN
        FOR r IN SELECT * FROM pg_event_trigger_ddl_commands()
                 WHERE object_type = 'index' AND schema_name = '{schema}' LOOP
            INSERT INTO "{schema}".builds VALUES (r.object_identity, current_setting('maintenance_work_mem'));
        END LOOP;
    END"""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
        con.execute(sql.SQL("CREATE TABLE {}.builds (index text, memory text)").format(s))
        con.execute(sql.SQL("CREATE FUNCTION {}.record_build() RETURNS event_trigger LANGUAGE plpgsql AS {}")
                    .format(s, sql.Literal(body)))
        con.execute(sql.SQL("CREATE EVENT TRIGGER {} ON ddl_command_end WHEN TAG IN ('CREATE INDEX') "
                            "EXECUTE FUNCTION {}.record_build()").format(trigger, s))
        try:
            yield builds
        finally:
            con.execute(sql.SQL("DROP EVENT TRIGGER IF EXISTS {}").format(trigger))
            builds += [(r[0], r[1]) for r in con.execute(sql.SQL("SELECT index, memory FROM {}.builds").format(s))]


def hnsw(builds: list[tuple[str, str]]) -> list[str]:
    return [memory for index, memory in builds if index.endswith("_hnsw")]


async def test_the_settings_build_memory_is_the_sessions_while_the_index_is_built(
    tmp_path, server, postgres_server, pg_schema
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\nurl = "{postgres_server.url}"\nschema = "{pg_schema}"\nbuild_memory = "96mb"\n',
                      encoding="utf-8")
    store_settings = load_settings(config, env={}).store
    assert store_settings.build_memory == "96MB"
    with recorded_builds(postgres_server.url, pg_schema) as builds:
        service = await KnowledgeService.open(settings=fake_settings(tmp_path / "data", server.url)
                                              .with_(store=store_settings))
        try:
            base = await service.create_base("Big", FAKE_MODEL, None)
            store = service._stores.get(base.id, base.dimensions)  # the facade's own store of the base
            assert store.tuning.build_memory == "96MB"
            assert store.build_index() and store.has_hnsw() and store.check_invariants() == []
        finally:
            await service.close()
    assert hnsw(builds) == ["96MB"]
    assert len(builds) > 1  # the base's other indexes were built with the server's default
    assert all(memory != "96MB" for index, memory in builds if not index.endswith("_hnsw"))


def test_a_build_past_the_size_uses_the_tuning_and_leaves_the_connection_as_it_was(postgres_server, pg_schema) -> None:
    """The build that a write past `hnsw_from` makes due (on the writing connection, after
    its commit) runs with the tuning's memory; the pooled connection it ran on is back at
    the server's default afterwards."""
    manager = PgStoreManager(postgres_server.url, schema=pg_schema, pool_size=1,
                             tuning=PgTuning(hnsw_from=3, build_memory="262144kB"))
    try:
        with recorded_builds(postgres_server.url, pg_schema) as builds:
            store = manager.create("b", 4)
            store.replace_items([("a", [Chunk(f"row {i}", {}) for i in range(4)], np.eye(4, dtype=np.float32))])
        assert store.has_hnsw()
        assert hnsw(builds) == ["256MB"]  # PostgreSQL shows 262144kB in its largest whole unit
        with psycopg.connect(postgres_server.url) as con:
            (default,) = con.execute("SHOW maintenance_work_mem").fetchone()
        with manager._pool.connection() as con:  # the one pooled connection the build ran on
            assert con.execute("SHOW maintenance_work_mem").fetchone() == (default,)
    finally:
        manager.close_all()

"""Shared fixtures. Tests use real files, real SQLite and real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Keep the suite within a few minutes on 2 cores; CI gets the same profile.
settings.register_profile(
    "ktui",
    max_examples=int(os.environ.get("KTUI_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("ktui")


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path, monkeypatch):
    """No test reads the developer's real settings or data, or a real OLLAMA_HOST."""
    monkeypatch.setenv("KTUI_CONFIG", str(tmp_path / "no-such-config.toml"))
    monkeypatch.delenv("KTUI_CONFIG", raising=False)
    monkeypatch.setenv("KTUI_HOME", str(tmp_path / "ktui-home"))
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
async def db(tmp_path):
    """A fresh catalogue database (core.db.Database) in the test's temporary directory."""
    from ktui.core.db import Database

    database = await Database.open(tmp_path / "data")
    yield database
    await database.close()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL 16 + pgvector (tests/support/postgres.py), one per test process,
    started on first use and stopped (its files deleted) at the end of the session."""
    from tests.support.postgres import running_server

    with running_server() as server:
        yield server


@pytest.fixture
def pg_schema(postgres_server):
    """A fresh, empty schema of that server for one test (dropped afterwards)."""
    with postgres_server.schema() as name:
        yield name

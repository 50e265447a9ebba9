"""The facade on either backend for the contract tests: the same assertions on SQLite and on a
shared PostgreSQL store (a fresh schema of the real server of tests/support/postgres.py).

`BACKENDS` are the parameters; `backend_overrides(kind, request)` gives the settings
overrides of that backend for tests/support/services.py `open_service`.
"""

from __future__ import annotations

from typing import Any

BACKENDS = ["sqlite", "postgres"]


def backend_overrides(kind: str, request: Any) -> dict[str, Any]:
    if kind == "sqlite":
        return {}
    from ktui.core.config import StoreSettings

    server = request.getfixturevalue("postgres_server")
    return {"store": StoreSettings(url=server.url, schema=request.getfixturevalue("pg_schema"))}


def backend_fixture(module: str, sqlite_only: dict[str, str] | None = None) -> Any:
    """An autouse fixture for a test module that opens services with `open_service`: every
    test runs on both backends (the module's `open_service` opens the parameter's), except
    the tests named in ``sqlite_only``, skipped on PostgreSQL with the reason given there.
    Use: ``backend = backend_fixture(__name__, {...})``."""
    import sys

    import pytest

    from tests.support import services

    skip = sqlite_only or {}

    @pytest.fixture(autouse=True, params=BACKENDS)
    def backend(request: Any, monkeypatch: Any) -> str:
        if request.param == "postgres" and request.node.originalname in skip:
            pytest.skip(skip[request.node.originalname])
        overrides = backend_overrides(request.param, request)
        original = services.open_service

        def opened(data_dir: Any, server_url: str, **kw: Any) -> Any:
            return original(data_dir, server_url, **overrides, **kw)

        monkeypatch.setattr(sys.modules[module], "open_service", opened)
        return str(request.param)

    return backend

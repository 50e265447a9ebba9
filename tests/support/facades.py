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

"""The `[store]` URL: which backend holds the catalogue and the chunks, checked and named safely.

No driver is imported here (a SQLite user never loads psycopg): a URL is checked with the
standard library's `urlsplit`, and named in messages only through `redact_store_url`, which
keeps user, host, port and database and drops the password and every query parameter
(TLS key paths, passwords passed as `?password=`). The driver-side twin of `redact` is
`ktui.core.store.postgres.connection.redact`; both print the same shape.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

SCHEMES = ("postgresql", "postgres")
DEFAULT_SCHEMA = "ktui"
SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")  # a PostgreSQL identifier that needs no quoting


class StoreUrlError(ValueError):
    """Why a store URL cannot be used; the message never holds the URL's secrets."""


def check_store_url(url: object) -> str:
    """The URL, stripped, when it names a PostgreSQL database; else StoreUrlError saying why
    (without repeating the URL, which may carry a password)."""
    if not isinstance(url, str) or not url.strip():
        raise StoreUrlError("must be a non-empty postgresql:// URL")
    url = url.strip()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise StoreUrlError(f"is not a valid URL ({_safe_reason(exc)})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        shown = f"'{scheme}://'" if scheme else "no scheme"
        raise StoreUrlError(f"must be a postgresql:// (or postgres://) URL, not {shown}; "
                            "leave it out to keep the SQLite store in the data directory")
    if not parts.netloc and not parts.path.strip("/") and "host=" not in parts.query:
        raise StoreUrlError("names no server and no database (postgresql://user@host:port/database)")
    return url


def check_schema(schema: object) -> str:
    if not isinstance(schema, str) or not SCHEMA_NAME.match(schema):
        raise StoreUrlError("must be lower-case letters, digits and _ (at most 63, not starting with a digit)")
    return schema


def redact_store_url(url: str) -> str:
    """``postgresql://user@host:port/dbname``: enough to tell servers apart, no secret."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "postgresql://(unparsable URL)"
    user = f"{unquote(parts.username)}@" if parts.username else ""
    host = unquote(parts.hostname or "")
    if not host:
        socket = parse_qs(parts.query).get("host", [""])[0]
        host = f"[socket {socket}]" if socket.startswith("/") else socket
    return f"postgresql://{user}{host}{f':{port}' if port else ''}/{unquote(parts.path.lstrip('/'))}"


def _safe_reason(exc: ValueError) -> str:
    # urlsplit's messages name the problem ("Port could not be cast to integer value as 'x'"),
    # never the password; keep only the part before any quoted fragment of the URL
    return str(exc).split(" as ", 1)[0].split(":", 1)[0] or "malformed"

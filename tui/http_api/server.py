"""`ktui serve [--host 127.0.0.1] [--port N] [--token T]`: the HTTP API on uvicorn.

The token rule: on 127.0.0.1 (or ::1, localhost) a token is optional; binding
any other address without one (`--token`, settings `serve_token`, or
$KTUI_SERVE_TOKEN) is refused before anything starts. With a token, every
request must carry it.

`ktui serve` holds the data directory (it runs the queue and recovers
unfinished work once, when it starts) and records its URL in the lock file,
so a second process that is refused a write is told where to send it. When
another process (the TUI) already holds the directory, it serves as a reader:
reads answer, writes are refused with 409 naming the holder.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import sys
from typing import Any

import uvicorn

from ktui.core import Settings
from ktui.core.errors import DataDirInUseError, ValidationError
from ktui.core.service import KnowledgeService
from ktui.tui.http_api.app import build_app

log = logging.getLogger(__name__)

LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_token(settings: Settings, host: str, token: str | None) -> str | None:
    """The token to require, or a ValidationError when the address needs one and there is none."""
    if token is not None and not token.strip():
        raise ValidationError.field("token", "must not be empty")
    token = token or settings.serve_token or os.environ.get("KTUI_SERVE_TOKEN") or None
    if token is None and not is_loopback(host):
        raise ValidationError.field(
            "host", f"binding {host} (beyond this machine) needs a token: --token T, settings 'serve_token' "
            "or $KTUI_SERVE_TOKEN; every request must then send 'Authorization: Bearer T'")
    return token


async def open_service(settings: Settings) -> KnowledgeService:
    try:
        return await KnowledgeService.open(settings=settings, recover=True, command="ktui serve")
    except DataDirInUseError as exc:
        print(f"ktui serve: {exc}", file=sys.stderr)
        print("ktui serve: serving read-only beside it (writes answer 409)", file=sys.stderr)
        return await KnowledgeService.open(settings=settings, read_only=True)


class _Server(uvicorn.Server):
    """Announces the bound URL (port 0 picks one) in the lock file and on stderr once listening."""

    def __init__(self, config: uvicorn.Config, ks: KnowledgeService, host: str):
        super().__init__(config)
        self.ks, self.host = ks, host

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        port = next((s.getsockname()[1] for server in self.servers for s in server.sockets), self.config.port)
        host = f"[{self.host}]" if ":" in self.host else self.host
        url = f"http://{host}:{port}"
        self.ks.announce("ktui serve", url)
        print(f"ktui serve: listening on {url}{' (read-only)' if self.ks.read_only else ''}", file=sys.stderr,
              flush=True)


async def serve(settings: Settings, *, host: str, port: int, token: str | None) -> int:
    token = resolve_token(settings, host, token)
    if not 0 <= port <= 65535:
        raise ValidationError.field("port", "must be from 0 to 65535")
    ks = await open_service(settings)
    try:
        config = uvicorn.Config(build_app(ks, token=token), host=host, port=port, log_level="warning",
                                lifespan="off", access_log=False)
        server = _Server(config, ks, host)
        await server.serve()
    finally:
        await ks.close()
    return 0


def main(settings: Settings, *, host: str, port: int, token: str | None) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="ktui serve: %(levelname)s %(message)s")
    return asyncio.run(serve(settings, host=host, port=port, token=token))

"""A real HTTP server on 127.0.0.1 for tests, driven by a plain Python handler.

Tests describe responses with a function `(Request) -> Response`; the server runs
in a background thread so async code under test talks to it over a real socket.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str  # includes the query string
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        import json

        return json.loads(self.body or b"null")


@dataclass
class Response:
    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to sleep before answering (timeouts)

    @classmethod
    def json(cls, payload: Any, status: int = 200, **kw: Any) -> Response:
        import json

        return cls(status, json.dumps(payload), {"Content-Type": "application/json", **kw.pop("headers", {})}, **kw)


Handler = Callable[[Request], Response]


class LocalServer:
    """Holds the server; `url` is its base address, `requests` every request seen."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with outer._lock:
                    outer.requests.append(req)
                try:
                    resp = outer.handler(req)
                except Exception as exc:  # a bug in a test handler: answer 599 so it shows
                    resp = Response(599, f"test handler failed: {exc!r}")
                if resp.delay:
                    import time

                    time.sleep(resp.delay)
                payload = resp.body.encode() if isinstance(resp.body, str) else resp.body
                try:
                    self.send_response(resp.status)
                    headers = {"Content-Length": str(len(payload)), **resp.headers}
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> LocalServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serve(handler: Handler) -> Iterator[LocalServer]:
    server = LocalServer(handler).start()
    try:
        yield server
    finally:
        server.stop()


def routes(table: dict[str, Response | Callable[[Request], Response]]) -> Handler:
    """Build a handler from `{"/path": Response | fn}`; unknown paths answer 404."""

    def handler(req: Request) -> Response:
        path = req.path.split("?", 1)[0]
        entry = table.get(path)
        if entry is None:
            return Response(404, "not found")
        return entry(req) if callable(entry) else entry

    return handler

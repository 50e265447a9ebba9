"""The two transports of `ProviderHttp`: the standard library's `http.client` for plain
HTTP to this machine, httpx for everything else; and the failures both report.

Why not httpx for loopback: most providers of a local knowledge base run on the same
machine (Ollama, llama.cpp, infinity), and for them httpx's import (httpx, httpcore,
anyio, h11), its client set-up and its first connection were ~160 ms of every
`ktui search` (issue 17, docs/benchmarks.md). Plain HTTP to 127.0.0.1 needs none of
what httpx adds (TLS, proxies, redirects, compression). The protocol itself is
spoken by `http.client` — keep-alive, Content-Length and chunked bodies, status and
header parsing — and this module only pools its connections (at most
`max_connections` at once), runs each exchange on a daemon thread (a provider that
never answers cannot hold the loop, the default executor, or the process's exit),
sends again once on a fresh connection when a kept-alive one turns out to be closed,
and aborts the exchange's socket when the awaiting task is cancelled.

Failures are the same four for both transports, so `ProviderHttp` maps them to
user-facing errors once: `TransportConnectError` (nothing listens),
`TransportTimeout`, `TransportDropped` (the connection broke mid-exchange, or the
answer was not HTTP) and `TransportError` (anything else).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class TransportError(Exception):
    """The request failed for a reason none of the subclasses names."""


class TransportConnectError(TransportError):
    """No connection could be made (connection refused, host unreachable)."""


class TransportTimeout(TransportError):
    """The server did not answer in time."""


class TransportDropped(TransportError):
    """The connection broke during the exchange, or the answer was not HTTP/1.x."""


@dataclass
class LocalResponse:
    status_code: int
    headers: dict[str, str]  # lower-case names
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class _Stale(Exception):
    """A kept-alive connection failed before any answer: send again on a fresh one."""


class LocalClient:
    """HTTP/1.1 with keep-alive to one plain-HTTP host on this machine, on `http.client`."""

    def __init__(self, host: str, port: int, *, headers: Mapping[str, str], timeout: float,
                 connect_timeout: float, max_connections: int):
        self.host, self.port = host, port
        self._headers = dict(headers)
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self._max_connections = max(1, max_connections)
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    async def request(self, method: str, url: str, json: Any = None) -> LocalResponse:  # noqa: A002 - httpx's name
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = dict(self._headers)
        body: bytes | None = None
        if json is not None:
            body = _dumps(json)
            headers["Content-Type"] = "application/json"
        elif method not in ("GET", "HEAD"):
            body = b""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_connections)
        async with self._slots:
            loop = asyncio.get_running_loop()
            done: asyncio.Future[LocalResponse] = loop.create_future()
            current: list[http.client.HTTPConnection] = []  # the exchange's connection, to abort it

            def run() -> None:
                try:
                    outcome: Any = self._exchange(method, target, body, headers, current)
                    ok = True
                except BaseException as exc:  # handed to the awaiting task
                    outcome, ok = exc, False
                try:
                    loop.call_soon_threadsafe(_settle, done, outcome, ok)
                except RuntimeError:  # the loop is closed: nobody is waiting any more
                    pass

            threading.Thread(target=run, name="ktui-http", daemon=True).start()
            try:
                return await done
            except asyncio.CancelledError:
                for conn in current:
                    _abort(conn)
                raise

    def _exchange(self, method: str, target: str, body: bytes | None, headers: dict[str, str],
                  current: list[http.client.HTTPConnection]) -> LocalResponse:
        while (conn := self._take_idle()) is not None:
            current[:] = [conn]
            try:
                return self._send(conn, method, target, body, headers, fresh=False)
            except _Stale:
                conn.close()
        conn = self._connect()
        current[:] = [conn]
        return self._send(conn, method, target, body, headers, fresh=True)

    def _take_idle(self) -> http.client.HTTPConnection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _connect(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)
        try:
            conn.connect()
        except TimeoutError:
            conn.close()
            raise TransportTimeout(f"no connection within {self.connect_timeout:g} s") from None
        except OSError as exc:
            conn.close()
            raise TransportConnectError(exc.strerror or str(exc)) from None
        assert conn.sock is not None
        conn.sock.settimeout(self.timeout)
        return conn

    def _send(self, conn: http.client.HTTPConnection, method: str, target: str, body: bytes | None,
              headers: dict[str, str], *, fresh: bool) -> LocalResponse:
        started = False
        try:
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            started = True
            content = response.read()
        except TimeoutError:
            conn.close()
            raise TransportTimeout(f"no answer within {self.timeout:g} s") from None
        except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as exc:
            conn.close()
            if not fresh and not started:
                raise _Stale from None
            raise TransportDropped(str(exc) or type(exc).__name__) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            conn.close()
            raise TransportDropped(str(exc) or type(exc).__name__) from None
        found: dict[str, str] = {}
        for name, value in response.getheaders():
            key = name.lower()
            found[key] = f"{found[key]}, {value}" if key in found else value
        with self._lock:
            keep = not response.will_close and not self._closed
            if keep:
                self._idle.append(conn)
        if not keep:
            conn.close()
        return LocalResponse(response.status, found, content)

    async def aclose(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _settle(done: asyncio.Future[LocalResponse], outcome: Any, ok: bool) -> None:
    if done.done():  # cancelled meanwhile
        return
    if ok:
        done.set_result(outcome)
    else:
        done.set_exception(outcome)


def _abort(conn: http.client.HTTPConnection) -> None:
    """Wake the thread blocked on `conn` (a cancelled exchange): shut its socket down."""
    sock = conn.sock
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

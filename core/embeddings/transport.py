"""The two transports of `ProviderHttp`: a small HTTP/1.1 client for plain HTTP to this
machine, httpx for everything else; and the failures both report.

Why a client of our own for loopback: most providers of a local knowledge base run
on the same machine (Ollama, llama.cpp, infinity). For them httpx brings its
import (httpx, httpcore, anyio, h11: ~60-90 ms), its client set-up and its first
connection to every `ktui search`, which is most of what a search costs beyond
numpy (issue 17, docs/benchmarks.md). Plain HTTP to 127.0.0.1 needs none of what
httpx is for: no TLS, no proxy (never used for loopback), no redirects, no
compression asked for. What it needs is here: keep-alive connections (at most
`max_connections` at once), Content-Length and chunked bodies, a timeout per
request, and one retry on a fresh connection when a kept-alive one turns out to be
closed by the server (like httpx).

Failures are the same four for both transports, so `ProviderHttp` maps them to
user-facing errors once: `TransportConnectError` (nothing listens),
`TransportTimeout`, `TransportDropped` (the connection broke mid-exchange, or the
answer was not HTTP) and `TransportError` (anything else).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_HEADER_LINES = 200
MAX_LINE_BYTES = 64 * 1024


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


_Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class LocalClient:
    """HTTP/1.1 with keep-alive to one plain-HTTP host (a loopback one: no TLS, no proxy)."""

    def __init__(self, host: str, port: int, *, headers: Mapping[str, str], timeout: float,
                 connect_timeout: float, max_connections: int):
        self.host, self.port = host, port
        self._host_header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self._max_connections = max(1, max_connections)
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(self, method: str, url: str, json: Any = None) -> LocalResponse:  # noqa: A002 - httpx's name
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        body = b"" if json is None else _dumps(json)
        head = f"{method} {target} HTTP/1.1\r\nHost: {self._host_header}\r\n{self._headers}"
        if json is not None:
            head += "Content-Type: application/json\r\n"
        if json is not None or method not in ("GET", "HEAD"):
            head += f"Content-Length: {len(body)}\r\n"
        message = head.encode("latin-1") + b"\r\n" + body
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_connections)
        async with self._slots:
            try:
                async with asyncio.timeout(self.timeout):
                    return await self._exchange(message, method)
            except TimeoutError:
                raise TransportTimeout(f"no answer within {self.timeout:g} s") from None

    async def _exchange(self, message: bytes, method: str) -> LocalResponse:
        while self._idle:  # a kept-alive connection the server may have closed meanwhile
            conn = self._idle.pop()
            try:
                return await self._send(conn, message, method)
            except _StaleConnection:
                _close(conn)
        return await self._send(await self._connect(), message, method, fresh=True)

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout):
                return await asyncio.open_connection(self.host, self.port)
        except TimeoutError:
            raise TransportTimeout(f"no connection within {self.connect_timeout:g} s") from None
        except OSError as exc:
            raise TransportConnectError(exc.strerror or str(exc)) from None

    async def _send(self, conn: _Connection, message: bytes, method: str, *, fresh: bool = False) -> LocalResponse:
        reader, writer = conn
        started = False
        try:
            writer.write(message)
            await writer.drain()
            status_line = await reader.readline()
            if not status_line:
                raise ConnectionResetError("the server closed the connection")
            started = True
            response, reusable = await _read_response(reader, status_line, method)
        except _StaleConnection:
            raise
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            _close(conn)
            if not fresh and not started:
                raise _StaleConnection from None
            raise TransportDropped(str(exc) or type(exc).__name__) from None
        except BaseException:  # cancelled or timed out mid-exchange: the connection's state is unknown
            _close(conn)
            raise
        if reusable and not self._closed:
            self._idle.append(conn)
        else:
            _close(conn)
        return response

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)
        for _, writer in idle:
            try:
                await writer.wait_closed()
            except OSError:
                pass


class _StaleConnection(Exception):
    """A kept-alive connection failed before any answer: send again on a fresh one."""


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _close(conn: _Connection) -> None:
    try:
        conn[1].close()
    except (OSError, RuntimeError):  # RuntimeError: the loop is already closed
        pass


async def _read_response(reader: asyncio.StreamReader, status_line: bytes,
                         method: str) -> tuple[LocalResponse, bool]:
    """The response after its status line, and whether the connection may be reused."""
    version, _, rest = status_line.decode("latin-1").strip().partition(" ")
    code = rest.partition(" ")[0]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ValueError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
    status = int(code)
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        line = await reader.readline()
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        if line in (b"\r\n", b"\n"):
            break
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line[:80]!r}")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    else:
        raise ValueError("too many header lines")
    connection = headers.get("connection", "").lower()
    reusable = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return LocalResponse(status, headers, b""), reusable
    if "chunked" in headers.get("transfer-encoding", "").lower():
        content = await _read_chunked(reader)
    elif "content-length" in headers:
        content = await reader.readexactly(int(headers["content-length"]))
    else:  # the body ends with the connection
        content, reusable = await reader.read(), False
    return LocalResponse(status, headers, content), reusable


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readline()
        if not size_line:
            raise asyncio.IncompleteReadError(b"", None)
        size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            while await reader.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the CRLF after each chunk

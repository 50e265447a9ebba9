"""The loopback transport (core/embeddings/transport.py: http.client on daemon threads)
against scripted servers: real sockets on 127.0.0.1, each answer written byte for byte."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.http import ProviderHttp
from ktui.core.embeddings.transport import (
    LocalClient,
    TransportConnectError,
    TransportDropped,
    TransportTimeout,
)
from tests.support.embedding_server import start_embedding_server


class Scripted:
    """A server that answers the n-th request on each connection with `answers[...]`."""

    def __init__(self, answers: list[bytes], *, close_after: int | None = None, silent: bool = False):
        self.answers = answers
        self.close_after = close_after  # requests per connection before the server hangs up
        self.silent = silent
        self.requests: list[bytes] = []
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                if self.silent:
                    await asyncio.Event().wait()
                writer.write(self.answers[min(len(self.requests) - 1, len(self.answers) - 1)])
                await writer.drain()
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> tuple[Scripted, int]:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self, self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


def client(port: int, **kw: float) -> LocalClient:
    return LocalClient("127.0.0.1", port, headers={"Accept": "application/json"}, timeout=kw.get("timeout", 30.0),
                       connect_timeout=10.0, max_connections=2)


async def test_a_json_post_and_keep_alive_reuse():
    async with Scripted([ok(b'{"a": 1}')]) as (server, port):
        c = client(port)
        first = await c.request("POST", f"http://127.0.0.1:{port}/v1/embeddings?x=1", json={"input": ["é"]})
        second = await c.request("GET", f"http://127.0.0.1:{port}/v1/models")
        await c.aclose()
    assert first.status_code == 200 and first.json() == {"a": 1} and second.json() == {"a": 1}
    assert server.connections == 1  # kept alive
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/embeddings?x=1 HTTP/1.1\r\n") and b"Host: 127.0.0.1:" in head
    assert json.loads(body) == {"input": ["é"]}


async def test_chunked_bodies_and_error_statuses_with_headers():
    chunked = (b"HTTP/1.1 503 Busy\r\nRetry-After: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"4\r\n{\"a\"\r\n5;ext=1\r\n: 1}\n\r\n0\r\n\r\n")
    async with Scripted([chunked]) as (_, port):
        c = client(port)
        resp = await c.request("GET", f"http://127.0.0.1:{port}/")
        await c.aclose()
    assert resp.status_code == 503 and resp.headers["retry-after"] == "2" and resp.json() == {"a": 1}


async def test_a_body_that_ends_with_the_connection_is_read_whole_and_the_connection_not_reused():
    answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"b\": 2}"
    async with Scripted([answer], close_after=1) as (server, port):
        c = client(port)
        assert (await c.request("GET", f"http://127.0.0.1:{port}/")).json() == {"b": 2}
        assert (await c.request("GET", f"http://127.0.0.1:{port}/")).json() == {"b": 2}
        await c.aclose()
    assert server.connections == 2


async def test_a_kept_alive_connection_the_server_closed_is_replaced_once():
    async with Scripted([ok(b"{}")], close_after=1) as (server, port):  # hangs up after each answer
        c = client(port)
        await c.request("GET", f"http://127.0.0.1:{port}/")
        await asyncio.sleep(0)  # let the server's close reach us (or not: either way it must work)
        assert (await c.request("GET", f"http://127.0.0.1:{port}/")).status_code == 200
        await c.aclose()
    assert server.connections == 2


async def test_refused_dropped_garbled_and_silent_servers():
    async with Scripted([b""]) as (_, port):  # free port afterwards
        pass
    c = client(port)
    with pytest.raises(TransportConnectError):
        await c.request("GET", f"http://127.0.0.1:{port}/")
    async with Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], close_after=1) as (_, port):
        with pytest.raises(TransportDropped):
            await client(port).request("GET", f"http://127.0.0.1:{port}/")
    async with Scripted([b"SSH-2.0-OpenSSH\r\n\r\n"]) as (_, port):
        with pytest.raises(TransportDropped):
            await client(port).request("GET", f"http://127.0.0.1:{port}/")
    async with Scripted([b""], silent=True) as (_, port):
        with pytest.raises(TransportTimeout):
            await client(port, timeout=0.05).request("GET", f"http://127.0.0.1:{port}/")


@pytest.mark.parametrize("url_form", ["http://127.0.0.1:{port}", "http://u:p@127.0.0.1:{port}"])
async def test_loopback_http_uses_the_local_client_and_anything_else_httpx(url_form):
    """Both transports embed through the same server; userinfo in the URL goes to httpx (basic auth)."""
    server = start_embedding_server(8)
    try:
        http = ProviderHttp(ProviderConfig(name="p", kind="openai", base_url=url_form.format(port=server.port)))
        body = await http.request_json("POST", f"http://127.0.0.1:{server.port}/v1/embeddings",
                                       {"model": "deterministic", "input": ["a b"]})
        assert len(body["data"]) == 1
        assert isinstance(http._client, LocalClient) == ("@" not in url_form)
        await http.aclose()
    finally:
        server.stop()


def _http_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "ktui-http")


async def test_a_cancelled_exchange_aborts_its_socket_and_frees_its_thread():
    """A provider that never answers must not keep a thread (or the process) for the whole
    timeout once nobody waits: cancelling shuts the socket down and the thread ends."""
    async with Scripted([b""], silent=True) as (server, port):
        c = client(port, timeout=300.0)
        before = _http_threads()
        task = asyncio.create_task(c.request("POST", f"http://127.0.0.1:{port}/", json={"x": 1}))
        while not server.requests:  # the request reached the server; its answer never comes
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(10_000):  # bounds a failure only; the abort ends the thread at once
            if _http_threads() == before:
                break
            await asyncio.sleep(0.001)
        assert _http_threads() == before
        await c.aclose()

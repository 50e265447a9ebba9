"""Search latency through `ktui mcp` (stdio) and `ktui serve` (HTTP) next to the in-process facade.

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_frontends.py -m benchmark -s

One base of NOTES notes embedded by the deterministic test server (a real
OpenAI-compatible HTTP server on 127.0.0.1). Each front end answers the same
queries (distinct texts, so the embedding cache never answers); the figure is the
median wall-clock time per search from the caller's side, printed with its
target and its ratio to the in-process facade measured in the same run. The MCP
server and the HTTP server are readers/holders in their own processes, as a
user runs them. Nothing is asserted about timing.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ktui.core.models import ItemInput
from ktui.core.service import KnowledgeService
from tests.support.embedding_server import start_embedding_server
from tests.support.frontends import ServeProcess, Workspace

pytestmark = pytest.mark.benchmark

NOTES = 2000
QUERIES = 40
WORDS = ["otter", "river", "kelp", "stone", "shell", "storm", "harbour", "kite", "wind", "lava", "ash", "glacier"]


def note(n: int) -> str:
    return " ".join(WORDS[(n * k) % len(WORDS)] for k in range(1, 9)) + f" note {n}"


def queries(prefix: str) -> list[str]:
    return [f"{WORDS[q % len(WORDS)]} {WORDS[(q * 5) % len(WORDS)]} {prefix}{q}" for q in range(QUERIES)]


async def timed(calls) -> float:
    times = []
    for call in calls:
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_bench_search_latency_mcp_http_vs_facade(tmp_path):
    server = start_embedding_server(64, subprocess=True)
    try:
        ws = Workspace(tmp_path, server.url)

        async def setup_and_facade() -> tuple[str, float]:
            async with await KnowledgeService.open(settings=ws.settings()) as ks:
                base = await ks.create_base("Bench")
                for start in range(0, NOTES, 100):
                    await ks.add_items(base.id, [ItemInput("note", {"content": note(n)})
                                                 for n in range(start, min(NOTES, start + 100))])
                assert await ks.wait_idle(timeout=600)
                await ks.search(base.id, "warm up")
                seconds = await timed([lambda q=q: ks.search(base.id, q) for q in queries("facade")])
                return base.id, seconds

        base_id, facade = asyncio.run(setup_and_facade())

        async def mcp() -> float:
            cmd = ws.command("mcp")
            params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=ws.env(), cwd=str(ws.work))
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("search", {"query": "warm up", "bases": [base_id]})
                return await timed([lambda q=q: session.call_tool("search", {"query": q, "bases": [base_id]})
                                    for q in queries("mcp")])

        mcp_seconds = asyncio.run(mcp())

        serve = ServeProcess(ws)
        try:
            async def http() -> float:
                async with httpx.AsyncClient(base_url=serve.url, timeout=60) as client:
                    await client.post(f"/knowledge-bases/{base_id}/search", json={"query": "warm up"})
                    return await timed([lambda q=q: client.post(f"/knowledge-bases/{base_id}/search",
                                                                json={"query": q}) for q in queries("http")])

            http_seconds = asyncio.run(http())
        finally:
            serve.stop()
    finally:
        server.stop()
    print(f"\nsearch latency, {NOTES} notes, hybrid, median of {QUERIES} distinct queries:")
    print(f"  in-process facade: {facade * 1000:.1f} ms (baseline)")
    print(f"  ktui mcp (stdio, SDK client): {mcp_seconds * 1000:.1f} ms (target < 2x facade + 10 ms; "
          f"{mcp_seconds / facade:.2f}x facade)")
    print(f"  ktui serve (HTTP, httpx): {http_seconds * 1000:.1f} ms (target < 2x facade + 10 ms; "
          f"{http_seconds / facade:.2f}x facade)")

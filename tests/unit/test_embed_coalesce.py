"""The coalescer: callers' texts share requests only while the provider is busy."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from core.embeddings.coalesce import Coalescer


def make_send(log: list[list[str]], delay: float = 0.01, fail_on: str | None = None):
    async def send(texts: list[str]) -> np.ndarray:
        log.append(list(texts))
        await asyncio.sleep(delay)
        if fail_on is not None and fail_on in texts:
            raise RuntimeError("provider down")
        return np.array([[float(len(t)), float(i)] for i, t in enumerate(texts)], dtype=np.float32)

    return send


async def test_idle_provider_sends_at_once_and_busy_provider_batches():
    log: list[list[str]] = []
    c = Coalescer(make_send(log), max_in_flight=1, batch_size=8)
    results = await asyncio.gather(*(c.embed([f"t{i}", f"text{i}"]) for i in range(5)))
    # the first call went alone; the other four waited and left together
    assert log[0] == ["t0", "text0"]
    assert len(log) == 2 and len(log[1]) == 8
    for i, rows in enumerate(results):
        assert rows.shape == (2, 2)
        assert rows[:, 0].tolist() == [len(f"t{i}"), len(f"text{i}")]  # each caller gets its own rows


async def test_batches_never_exceed_the_batch_size():
    log: list[list[str]] = []
    c = Coalescer(make_send(log), max_in_flight=1, batch_size=3)
    await asyncio.gather(*(c.embed([str(i)]) for i in range(10)))
    assert max(len(b) for b in log) <= 3
    assert sorted(t for b in log for t in b) == sorted(str(i) for i in range(10))


async def test_a_failed_shared_request_fails_each_of_its_callers_only():
    log: list[list[str]] = []
    c = Coalescer(make_send(log, fail_on="bad"), max_in_flight=1, batch_size=2)
    first = asyncio.ensure_future(c.embed(["ok0"]))
    group = [asyncio.ensure_future(c.embed([t])) for t in ("bad", "ok1")]
    later = asyncio.ensure_future(c.embed(["ok2"]))
    await first
    for fut in group:
        with pytest.raises(RuntimeError, match="provider down"):
            await fut
    assert (await later).shape == (1, 2)


async def test_a_cancelled_caller_does_not_disturb_the_others():
    log: list[list[str]] = []
    c = Coalescer(make_send(log), max_in_flight=1, batch_size=8)
    busy = asyncio.ensure_future(c.embed(["busy"]))
    gone = asyncio.ensure_future(c.embed(["gone"]))
    kept = asyncio.ensure_future(c.embed(["kept"]))
    await asyncio.sleep(0)
    gone.cancel()
    assert (await kept).shape == (1, 2)
    await busy
    assert ["gone"] not in log and all("gone" not in b for b in log[1:])


async def test_a_burst_of_calls_lingers_briefly_and_shares_requests_but_a_lone_call_never_waits():
    log: list[list[str]] = []
    c = Coalescer(make_send(log, delay=0.001), max_in_flight=4, batch_size=64, linger=0.02)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await c.embed(["alone"])
    assert loop.time() - start < 0.015  # an idle provider answers a single call without lingering
    log.clear()

    async def staggered(i: int):
        await asyncio.sleep(0.002 * i)  # calls arriving back to back, like files finishing their reads
        return await c.embed([f"t{i}"])

    results = await asyncio.gather(*(staggered(i) for i in range(12)))
    assert [r.shape for r in results] == [(1, 2)] * 12
    assert sorted(t for b in log for t in b) == sorted(f"t{i}" for i in range(12))
    assert len(log) < 12  # the burst shared requests

"""The coalescer: callers' texts share requests only while the provider is busy."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ktui.core.embeddings.coalesce import Coalescer


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


async def test_a_repeating_burst_is_learned_and_leaves_as_soon_as_it_is_complete():
    """Five callers arriving a millisecond apart, round after round (indexing tasks in
    step): once a burst of five has been seen, the request leaves when the fifth
    arrives instead of after the linger."""
    log: list[list[str]] = []
    linger = 0.02
    c = Coalescer(make_send(log, delay=0.001), max_in_flight=2, batch_size=64, linger=linger, busy_window=0.2)
    loop = asyncio.get_running_loop()

    async def caller(round_: int, i: int) -> None:
        await asyncio.sleep(0.001 * i)
        await c.embed([f"r{round_}c{i}"])

    durations = []
    for round_ in range(4):
        start = loop.time()
        await asyncio.gather(*(caller(round_, i) for i in range(5)))
        durations.append(loop.time() - start)
        await asyncio.sleep(linger * 1.5)  # the quiet gap that ends a burst
    assert c.burst == 5
    assert all(d < linger for d in durations[2:]), durations  # no waiting out the linger any more
    assert [sorted(b) for b in log[-2:]] == [[f"r{r}c{i}" for i in range(5)] for r in (2, 3)]


async def test_a_smaller_burst_still_leaves_after_the_linger():
    log: list[list[str]] = []
    linger = 0.03
    c = Coalescer(make_send(log, delay=0.001), max_in_flight=2, batch_size=64, linger=linger)
    loop = asyncio.get_running_loop()
    for size in (5, 5, 3):
        start = loop.time()
        await asyncio.gather(*(c.embed([f"{size}-{i}"]) for i in range(size)))
        elapsed = loop.time() - start
        await asyncio.sleep(linger * 1.5)
    assert elapsed >= linger * 0.9  # three of an expected five: it waited for the others, then went
    assert sorted(log[-1]) == [f"3-{i}" for i in range(3)]


async def test_rounds_closer_than_a_linger_still_fill_one_request_each():
    """Once a burst of five is known, back-to-back rounds (no quiet gap, so the cluster
    never ends) must not fall back to one request per call."""
    log: list[list[str]] = []
    c = Coalescer(make_send(log, delay=0.002), max_in_flight=2, batch_size=64, linger=0.008)
    for _ in range(2):  # learn: two bursts of five with a quiet gap
        await asyncio.gather(*(c.embed(["x"]) for _ in range(5)))
        await asyncio.sleep(0.02)
    log.clear()

    async def caller(i: int) -> None:
        await asyncio.sleep(0.0005 * i)
        await c.embed(["y"])

    for _ in range(6):
        await asyncio.gather(*(caller(i) for i in range(5)))
        await asyncio.sleep(0.004)  # shorter than the linger
    assert [len(b) for b in log] == [5] * 6

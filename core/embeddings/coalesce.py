"""Opportunistic batching of embedding requests across callers.

During indexing, five tasks each ask for a handful of chunk vectors at a time.
Sent one call per request, the per-request cost (HTTP machinery, JSON, a thread
hop for the built-in model) dominates: 2,000 small files mean 2,000 requests.
The coalescer sends a caller's texts at once while the provider has a free
slot, and otherwise queues them; when a request finishes, everything queued
(up to the batch size) leaves as one request. So there is no added latency when
the provider is idle, and requests grow exactly when the provider is the
bottleneck.

During a burst (calls arriving back to back) it also lingers a few milliseconds
so the next callers share the request. How many callers a burst brings is
learned: calls less than a linger apart form a cluster, and the largest of the
last few clusters is the expected burst. Once that many callers are waiting the
request leaves at once: with five indexing tasks that reach their embedding step
within a few milliseconds of each other, waiting out the rest of the linger after
the fifth has arrived is pure idle time. (Counting the waiting callers, not the
cluster, matters when rounds follow each other less than a linger apart: the
cluster then never ends, but each round still fills one request.)

Time comes from an injected `clock` and timers from an injected `call_later`
(both default to the running loop's), so the tests drive the linger and the
burst learning with a fake clock instead of real sleeps.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

Send = Callable[[list[str]], Awaitable[np.ndarray]]
Clock = Callable[[], float]


class Timer(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], Timer]


@dataclass
class _Waiter:
    texts: list[str]
    future: asyncio.Future[np.ndarray]


class Coalescer:
    def __init__(self, send: Send, *, max_in_flight: int, batch_size: int,
                 linger: float = 0.008, busy_calls: int = 3, busy_window: float = 0.05,
                 clock: Clock | None = None, call_later: CallLater | None = None):
        self._send = send
        self._clock = clock
        self._call_later = call_later
        self._max_in_flight = max(1, max_in_flight)
        self._batch_size = max(1, batch_size)
        self._queue: deque[_Waiter] = deque()
        self._in_flight = 0
        self._linger = linger
        self._busy_calls = busy_calls
        self._busy_window = busy_window
        self._recent: deque[float] = deque()
        self._timer: Timer | None = None
        self._clusters: deque[int] = deque(maxlen=8)  # sizes of the last clusters of calls
        self._cluster = 0  # calls in the current cluster
        self._last_call = float("-inf")
        self._requests: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones

    @property
    def burst(self) -> int | None:
        """Callers a burst is expected to bring (None until a cluster has ended)."""
        return max(self._clusters) if self._clusters else None

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts` (one row each), possibly sent together with other callers' texts."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[np.ndarray] = loop.create_future()
        self._queue.append(_Waiter(texts, future))
        now = self._clock() if self._clock is not None else loop.time()
        self._recent.append(now)
        while self._recent and now - self._recent[0] > self._busy_window:
            self._recent.popleft()
        if now - self._last_call > self._linger:  # a quiet gap: the previous cluster is over
            if self._cluster:
                self._clusters.append(self._cluster)
            self._cluster = 0
        self._cluster += 1
        self._last_call = now
        queued = sum(len(w.texts) for w in self._queue)
        burst = self.burst
        if (self._linger > 0 and len(self._recent) >= self._busy_calls and queued < self._batch_size
                and (burst is None or len(self._queue) < burst)):
            # calls are arriving back to back (an indexing burst): wait a few milliseconds
            # so that the next ones share this request; a lone call never waits
            if self._timer is None:
                call_later = self._call_later or loop.call_later
                self._timer = call_later(self._linger, self._linger_done)
        else:
            self._pump()
        return await future

    def _linger_done(self) -> None:
        self._timer = None
        self._pump()

    def _pump(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._queue and self._in_flight < self._max_in_flight:
            group: list[_Waiter] = []
            size = 0
            while self._queue:
                waiter = self._queue[0]
                if waiter.future.done():  # its caller was cancelled meanwhile
                    self._queue.popleft()
                    continue
                if group and size + len(waiter.texts) > self._batch_size:
                    break
                group.append(self._queue.popleft())
                size += len(waiter.texts)
            if not group:
                return
            self._in_flight += 1
            request = asyncio.get_running_loop().create_task(self._run(group))
            self._requests.add(request)
            request.add_done_callback(self._requests.discard)

    async def _run(self, group: list[_Waiter]) -> None:
        try:
            texts = [t for w in group for t in w.texts]
            try:
                matrix = await self._send(texts)
            except BaseException as exc:  # every caller of the shared request learns why it failed
                for w in group:
                    if not w.future.done():
                        w.future.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
                if not isinstance(exc, Exception):
                    raise
                return
            start = 0
            for w in group:
                rows = matrix[start : start + len(w.texts)] if matrix.shape[0] == len(texts) else matrix
                start += len(w.texts)
                if not w.future.done():
                    w.future.set_result(rows)
        finally:
            self._in_flight -= 1
            self._pump()

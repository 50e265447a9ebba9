"""Opportunistic batching of embedding requests across callers.

During indexing, five tasks each ask for a handful of chunk vectors at a time.
Sent one call per request, the per-request cost (HTTP machinery, JSON, a thread
hop for the built-in model) dominates: 2,000 small files mean 2,000 requests.
The coalescer sends a caller's texts at once while the provider has a free
slot, and otherwise queues them; when a request finishes, everything queued
(up to the batch size) leaves as one request. So there is no added latency when
the provider is idle, and requests grow exactly when the provider is the
bottleneck.

There is deliberately no linger (waiting a few milliseconds for more callers) and
no learned burst size: issue 14 re-measured both, ON vs OFF in the same run, on the
built-in model and through a zero-latency server, and neither paid by more than
the noise (tests/benchmarks/test_bench_speedups.py, docs/benchmarks.md), so they
were removed. Nothing here depends on time.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

Send = Callable[[list[str]], Awaitable[np.ndarray]]


@dataclass
class _Waiter:
    texts: list[str]
    future: asyncio.Future[np.ndarray]


class Coalescer:
    def __init__(self, send: Send, *, max_in_flight: int, batch_size: int):
        self._send = send
        self._max_in_flight = max(1, max_in_flight)
        self._batch_size = max(1, batch_size)
        self._queue: deque[_Waiter] = deque()
        self._in_flight = 0
        self._requests: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts` (one row each), possibly sent together with other callers' texts."""
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._queue.append(_Waiter(texts, future))
        self._pump()
        return await future

    def _pump(self) -> None:
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

"""One asyncio event loop running in a background thread, for synchronous drivers.

Hypothesis state machines are synchronous, but a KnowledgeService is bound to the
loop it was opened on. The machine therefore keeps one loop for its whole run and
submits each step with `run_coroutine_threadsafe`, bounded by a timeout: a step that
does not finish in time is reported as a hang instead of blocking the suite.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class StepHung(AssertionError):
    """A call did not finish within its time bound."""


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="faults-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0, what: str = "call") -> T:
        """Run `coro` on the loop; StepHung if it takes longer than `timeout` seconds."""

        async def bounded() -> T:
            try:
                return await asyncio.wait_for(coro, timeout)
            except TimeoutError:
                raise StepHung(f"{what} did not finish within {timeout:g} s") from None

        future = asyncio.run_coroutine_threadsafe(bounded(), self.loop)
        try:
            return future.result(timeout + 10)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise StepHung(f"{what} did not finish within {timeout:g} s (loop blocked)") from None

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()

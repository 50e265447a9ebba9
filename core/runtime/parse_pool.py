"""Parsing in worker processes.

Reading and chunking a file is pure Python work. In threads it competes for the
interpreter lock with the event loop (which the TUI shares) and with every other
indexing step, so on two cores it effectively runs on one. A small pool of worker
processes (`ingest.parse_workers`, default 1; see core/ingest/worker.py) moves it
to the other core.

The pool also contains misbehaving parsers: a parser that kills its process fails
only that item, and one that runs past `ingest.parse_timeout` is killed and its
item failed, instead of holding a worker forever. `parse_timeout` is the longest
a worker may go without a sign of life: a worker that reports progress (OCR,
page by page) gets the timeout afresh with each report, so a long scan is
bounded by its page limit and the time per page, not by one timeout for the
whole file. `parse_workers = 0` parses in threads instead (no extra process).
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import sys
from collections.abc import Callable
from typing import Any

from ktui.core.errors import IngestError
from ktui.core.ingest.worker import HEADER

log = logging.getLogger(__name__)


STARTUP_TIMEOUT = 60.0  # seconds a new worker may take to import the parsers


class _Worker:
    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process

    async def call(self, name: str, args: tuple[Any, ...], timeout: float,
                   on_progress: Callable[[int, int], None] | None = None) -> Any:
        """The answer to one request; TimeoutError when the worker is silent for `timeout` s."""
        assert self.process.stdin is not None
        payload = pickle.dumps((name, args), protocol=pickle.HIGHEST_PROTOCOL)
        self.process.stdin.write(HEADER.pack(len(payload)) + payload)
        await asyncio.wait_for(self.process.stdin.drain(), timeout)
        while True:
            message = await asyncio.wait_for(self.answer(), timeout)
            if message[0] != "progress":
                return message
            if on_progress is not None:
                on_progress(message[1], message[2])

    async def answer(self) -> Any:
        assert self.process.stdout is not None
        header = await self.process.stdout.readexactly(HEADER.size)
        (size,) = HEADER.unpack(header)
        return pickle.loads(await self.process.stdout.readexactly(size))

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


def worker_launch(memory_mb: int | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one parse worker.

    -P: the worker never puts its working directory on sys.path, so a folder
    holding a package named `ktui` (or anything the parsers import) cannot stand
    in for the installed one. KTUI_PARENT_PID names this process, so the worker
    exits when it is gone even if that happens before the worker has started
    watching (core/ingest/worker.py: exit_with_parent).
    """
    import os

    env = {**os.environ, "KTUI_PARENT_PID": str(os.getpid())}
    if memory_mb:
        env["KTUI_PARSE_MEMORY_MB"] = str(memory_mb)
    return [sys.executable, "-P", "-m", "ktui.core.ingest.worker"], env


class ParsePool:
    def __init__(self, workers: int, timeout: float, memory_mb: int | None = None):
        self.workers = workers
        self.timeout = timeout
        self.memory_mb = memory_mb  # address-space limit of each worker (RLIMIT_AS)
        self._idle: asyncio.Queue[_Worker | None] | None = None
        self._all: set[_Worker] = set()
        self._killed: set[_Worker] = set()  # killed but not yet reaped: close() waits for them
        self._closed = False

    async def run(self, what: str, name: str, fallback: Any, *args: Any,
                  on_progress: Callable[[int, int], None] | None = None) -> Any:
        """Call worker function `name(*args)` in a worker process; `fallback` is the same
        function, run in a thread when the pool has no workers. `on_progress(done, total)`
        hears a progress-reporting function's reports (on the event loop)."""
        if self.workers <= 0:
            if on_progress is None:
                return await asyncio.to_thread(fallback, *args)
            loop = asyncio.get_running_loop()
            report = lambda done, total: loop.call_soon_threadsafe(on_progress, done, total)  # noqa: E731
            return await asyncio.to_thread(fallback, *args, progress=report)
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(self.workers):
                self._idle.put_nowait(None)  # a slot; the process starts on first use
        slot = await self._idle.get()
        worker = slot
        if self._closed:  # never start a worker that nobody would close
            self._idle.put_nowait(worker)
            raise IngestError(f"Not read, ktui is shutting down: {what}")
        try:
            if worker is None or worker.process.returncode is not None:
                worker = await self._start()
            answer = await worker.call(name, args, self.timeout, on_progress)
            if len(answer) > 3 and answer[3] == "restart":  # past a limit: the worker is ending
                self._drop(worker)
                worker = None
        except TimeoutError:
            self._drop(worker)
            worker = None
            raise IngestError(f"Reading took longer than {self.timeout:g} s and was stopped: {what}") from None
        except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
            dead = worker
            self._drop(worker)
            worker = None
            why = ""
            if dead is not None:
                try:
                    code = await asyncio.wait_for(dead.process.wait(), 2)
                except TimeoutError:
                    code = None
                if code is not None and code < 0:
                    why = f" (killed by signal {-code}"
                    why += f"; it may have passed its memory limit of {self.memory_mb} MiB)" if self.memory_mb else ")"
            raise IngestError(f"The parser crashed while reading {what}{why}") from None
        except BaseException:
            # cancelled mid-call: the answer would arrive out of step with the next request
            self._drop(worker)
            worker = None
            raise
        finally:
            self._idle.put_nowait(worker)
        if answer[0] == "ok":
            return answer[1]
        message, is_ingest = answer[1], answer[2]
        if not is_ingest:
            log.error("parser failed on %s: %s", what, message)
        raise IngestError(message if is_ingest else f"Could not read {what}: {message}")

    async def _start(self) -> _Worker:
        command, env = worker_launch(self.memory_mb)
        process = await asyncio.create_subprocess_exec(
            *command,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,  # parser chatter must never paint over the TUI
        )
        worker = _Worker(process)
        self._all.add(worker)
        try:
            ready = await asyncio.wait_for(worker.answer(), STARTUP_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionResetError):
            self._drop(worker)
            raise IngestError(f"The parse worker did not start within {STARTUP_TIMEOUT:g} s") from None
        except BaseException:
            self._drop(worker)
            raise
        if ready != ("ready",):
            self._drop(worker)
            raise IngestError(f"The parse worker did not start properly (it said {ready!r})")
        return worker

    def _drop(self, worker: _Worker | None) -> None:
        if worker is not None:
            worker.kill()
            self._all.discard(worker)
            self._killed = {w for w in self._killed if w.process.returncode is None}  # forget the reaped
            self._killed.add(worker)

    async def close(self) -> None:
        self._closed = True
        workers, self._all = list(self._all), set()
        for worker in workers:
            if worker.process.stdin is not None and worker.process.returncode is None:
                worker.process.stdin.close()  # EOF: the worker's loop ends
        for worker in workers:
            try:
                await asyncio.wait_for(worker.process.wait(), 2)
            except TimeoutError:
                worker.kill()
                await worker.process.wait()
        killed, self._killed = list(self._killed), set()
        for worker in killed:  # reap them: no zombie outlives the pool
            await worker.process.wait()

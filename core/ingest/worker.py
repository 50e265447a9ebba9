"""A parse worker process: `python -P -m ktui.core.ingest.worker`.

It answers requests from the runtime's parse pool (core/runtime/parse_pool.py)
over its stdin/stdout: each message is a 4-byte big-endian length and a pickle.
A request is `(function name, args)`; only the functions in `functions()` can be
called. The answer is `("ok", result)` or `("error", message, is_ingest_error)`;
before it, a function in `PROGRESS_FUNCTIONS` may send any number of
`("progress", done, total)` messages (pages recognised by OCR), which also tell
the pool that the worker is not stuck.
Once its imports are done the worker sends `("ready",)`, so that a parse timeout
measures reading and never the interpreter's start-up.

A plain subprocess rather than multiprocessing: multiprocessing's "spawn" re-runs
the caller's main module in the child, which breaks any script that uses ktui as
a library without an `if __name__ == "__main__"` guard.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from ktui.core.errors import KnowledgeError

PROGRESS_FUNCTIONS = frozenset({"read_and_chunk_file"})  # take a `progress=` callback
HEADER = struct.Struct(">I")


def functions() -> dict[str, Callable[..., Any]]:
    """What a worker can be asked to run. Imported here, not at module level: the
    runtime imports this module for HEADER alone, and must not load every parser
    with it."""
    from ktui.core.ingest.pipeline import read_and_chunk_file, read_and_chunk_files

    return {"read_and_chunk_file": read_and_chunk_file, "read_and_chunk_files": read_and_chunk_files}


def read_message(stream: BinaryIO) -> Any | None:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    return pickle.loads(stream.read(size))


def write_message(stream: BinaryIO, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def serve(requests: BinaryIO, answers: BinaryIO, memory_mb: int | None = None) -> None:
    table = functions()  # the parsers load before "ready": a first file's timeout must not pay for them
    write_message(answers, ("ready",))
    while (request := read_message(requests)) is not None:
        name, args = request

        def progress(done: int, total: int) -> None:
            write_message(answers, ("progress", done, total))

        try:
            if name in PROGRESS_FUNCTIONS:
                answer: Any = ("ok", table[name](*args, progress=progress))
            else:
                answer = ("ok", table[name](*args))
        except MemoryError:
            # past the address-space limit: say which limit, then let the pool replace us
            # (a half-built object graph may still hold the memory)
            limit = f"its memory limit of {memory_mb} MiB" if memory_mb else "the memory available"
            write_message(answers, ("error", f"the parser passed {limit} (ingest.parse_memory_mb)", True, "restart"))
            return
        except KnowledgeError as exc:
            answer = ("error", str(exc), True)
        except Exception as exc:  # a parser bug: report it, keep serving
            answer = ("error", f"{type(exc).__name__}: {exc}", False)
        write_message(answers, answer)


def limit_memory(memory_mb: int) -> None:
    """Cap this process's address space: a hostile file (9M tiny docx paragraphs) then
    fails with MemoryError here instead of driving the machine into swap."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return
    limit = memory_mb * 1024 * 1024
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def exit_with_parent(poll_seconds: float = 1.0) -> None:
    """Die when the process that started us is gone, whatever we are doing.

    A parser can block where no request will ever reach it (opening a FIFO that a
    file was swapped for, a stalled network mount): stdin's EOF is then never read,
    so the worker would outlive ktui for ever. A daemon thread watches the parent
    id instead. Not PR_SET_PDEATHSIG: that fires when the *thread* that spawned us
    exits, and the runtime may spawn workers from any thread.
    """
    import threading
    import time

    named = os.environ.get("KTUI_PARENT_PID", "")
    parent = int(named) if named.isdigit() else os.getppid()  # named: a parent that died before this line counts

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)  # no clean-up can run in a thread blocked in open(); the OS reclaims all
            time.sleep(poll_seconds)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def main() -> None:
    exit_with_parent()
    memory_mb = int(os.environ.get("KTUI_PARSE_MEMORY_MB", "0") or 0) or None
    if memory_mb:
        limit_memory(memory_mb)
    # the protocol owns the real stdout; anything a library prints goes to stderr
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, answers, memory_mb)


if __name__ == "__main__":
    main()

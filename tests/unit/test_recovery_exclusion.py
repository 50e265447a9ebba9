"""Recovery batches and workflow writes exclude each other (core/runtime/recovery.py)."""

from __future__ import annotations

import asyncio

from ktui.core.runtime.recovery import _Exclusion


async def until(check) -> None:
    for _ in range(1000):  # bounded: each turn lets every ready task run one step
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError("never reached")


async def test_writes_share_and_a_batch_waits_for_the_writes_in_flight():
    ex = _Exclusion()
    log: list[str] = []
    release = asyncio.Event()

    async def write(name: str) -> None:
        async with ex.write():
            log.append(f"{name} in")
            await release.wait()
            log.append(f"{name} out")

    async def batch() -> None:
        async with ex.batch():
            log.append("batch")

    writes = [asyncio.ensure_future(write("w1")), asyncio.ensure_future(write("w2"))]
    await until(lambda: log.count("w1 in") + log.count("w2 in") == 2)  # writes share
    job = asyncio.ensure_future(batch())
    late = asyncio.ensure_future(write("w3"))  # a batch waits: a new write waits behind it
    await until(lambda: ex.writes_waiting == 1)
    assert "batch" not in log
    release.set()
    await asyncio.gather(*writes, job, late)
    assert log.index("batch") > log.index("w1 out") and log.index("batch") > log.index("w2 out")
    assert log.index("w3 in") > log.index("batch")


async def test_a_write_waits_for_a_running_batch_and_writes_nest():
    ex = _Exclusion()
    inside = asyncio.Event()
    release = asyncio.Event()
    log: list[str] = []

    async def batch() -> None:
        async with ex.batch():
            inside.set()
            await release.wait()
            log.append("batch done")

    async def nested_write() -> None:
        async with ex.write():
            async with ex.write():  # a reindex restarting itself: no deadlock
                log.append("write")

    job = asyncio.ensure_future(batch())
    await inside.wait()
    writer = asyncio.ensure_future(nested_write())
    await until(lambda: ex.writes_waiting == 1)
    assert log == []
    release.set()
    await asyncio.gather(job, writer)
    assert log == ["batch done", "write"]

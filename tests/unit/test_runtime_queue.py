"""TaskQueue bookkeeping that the runtime relies on (the queue runs no task here)."""

from __future__ import annotations

from ktui.core.runtime.queue import InterruptReason, TaskKind, TaskQueue


async def never_runs(task):  # the queue is never started: tasks stay pending
    raise AssertionError("not started")


async def test_next_pending_lists_the_next_tasks_of_one_kind_and_base_in_run_order():
    queue = TaskQueue(never_runs, concurrency=1)
    queue.enqueue(TaskKind.PREPARE_ROOT, "b1", "folder")
    queue.enqueue_many(TaskKind.INDEX_LEAF, "b1", ["l1", "l2"])
    queue.enqueue(TaskKind.INDEX_LEAF, "b2", "other-base")
    queue.enqueue_many(TaskKind.INDEX_LEAF, "b1", ["l3", "l4", "l5"])
    assert queue.next_pending(TaskKind.INDEX_LEAF, "b1", 3) == ["l1", "l2", "l3"]
    assert queue.next_pending(TaskKind.INDEX_LEAF, "b2", 3) == ["other-base"]
    assert queue.next_pending(TaskKind.PREPARE_ROOT, "b1", 3) == ["folder"]
    queue.interrupt(["l2"], InterruptReason.DELETE)
    assert queue.next_pending(TaskKind.INDEX_LEAF, "b1", 3) == ["l1", "l3", "l4"]


async def test_next_pending_looks_only_a_bounded_depth_into_the_queue():
    queue = TaskQueue(never_runs, concurrency=1)
    queue.enqueue_many(TaskKind.INDEX_LEAF, "busy", [f"x{i}" for i in range(100)])
    queue.enqueue(TaskKind.INDEX_LEAF, "late", "far-behind")
    assert queue.next_pending(TaskKind.INDEX_LEAF, "late", 2) == []  # 100 tasks ahead: not worth reading yet
    assert queue.next_pending(TaskKind.INDEX_LEAF, "busy", 2) == ["x0", "x1"]


async def test_an_interrupt_stops_a_long_step_at_once_and_says_why():
    import asyncio

    import pytest

    from ktui.core.errors import TaskInterrupted
    from ktui.core.runtime.queue import InterruptToken

    token = InterruptToken()
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def long_step():
        started.set()
        try:
            await asyncio.Event().wait()  # never finishes by itself
        finally:
            stopped.set()

    running = asyncio.ensure_future(token.run(long_step()))
    await started.wait()
    token.interrupt(InterruptReason.DELETE)
    with pytest.raises(TaskInterrupted, match="delete"):
        await asyncio.wait_for(running, 1)
    assert stopped.is_set()
    assert await InterruptToken().run(asyncio.sleep(0, result=7)) == 7  # an ordinary step just runs
    # cancelling the task itself stays a cancellation, not an interruption
    other = InterruptToken()
    started.clear()
    outer = asyncio.ensure_future(other.run(long_step()))
    await started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer


async def test_a_step_of_an_already_interrupted_task_never_starts():
    import warnings

    import pytest

    from ktui.core.errors import TaskInterrupted
    from ktui.core.runtime.queue import InterruptToken

    started = []

    async def step():
        started.append(True)

    token = InterruptToken()
    token.interrupt(InterruptReason.SHUTDOWN)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would be a RuntimeWarning
        with pytest.raises(TaskInterrupted, match="shutdown"):
            await token.run(step())
    assert started == []

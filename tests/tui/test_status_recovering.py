"""The status line says when the holder's recovery is still re-queuing work, or stopped."""

from __future__ import annotations

from ktui.core.models import QueueStats
from ktui.tui.widgets.status_line import StatusLine


def test_status_line_shows_recovery_progress_and_its_error():
    line = StatusLine(clock=lambda: 0.0)
    line.stats = QueueStats(3, 2, 0, 0, 0.0, recovering=1200)
    assert "recovering 1200 items…" in line._text().plain
    line.stats = QueueStats(0, 0, 5, 0, 0.0, recovery_error="Unexpected error: RuntimeError: boom")
    text = line._text().plain
    assert "recovering" not in text and "recovery stopped: Unexpected error: RuntimeError: boom" in text
    assert "recover" not in StatusLine(clock=lambda: 0.0)._text().plain  # nothing while none runs


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_eta_while_the_work_still_grows():
    """A folder walk queues files while earlier ones finish: the ETA of what was found so
    far would read 0s. While the work grew within SETTLE_SECONDS the line says so; once it
    has stayed put that long (on the injected clock), the ETA is back."""
    from ktui.tui.widgets.status_line import SETTLE_SECONDS

    clock = Clock()
    line = StatusLine(clock=clock)
    line.stats = QueueStats(10, 1, 0, 0, 5.0)
    line.eta = line.run.eta(line.stats)  # the run starts
    for second in range(1, 6):  # every second 10 files finish and the walk queues 10 more
        clock.now = second
        line.stats = QueueStats(10, 1, 10 * second, 0, 5.0)
        line.eta = line.run.eta(line.stats)
        assert line.eta is None and line.run.counting
        assert "still finding files" in line._text().plain and "ETA" not in line._text().plain
    clock.now = 5 + SETTLE_SECONDS - 0.5  # the walk is over: the work stops growing
    line.stats = QueueStats(5, 1, 55, 0, 5.0)
    line.eta = line.run.eta(line.stats)
    assert line.run.counting and line.eta is None
    clock.now = 5 + SETTLE_SECONDS + 0.5
    line.stats = QueueStats(4, 1, 56, 0, 5.0)
    line.eta = line.run.eta(line.stats)
    assert not line.run.counting and line.eta is not None and "ETA " in line._text().plain
    line.stats = QueueStats(0, 0, 61, 0, 0.0)  # idle: nothing counted any more
    line.eta = line.run.eta(line.stats)
    assert line.eta is None and not line.run.counting and "idle" in line._text().plain

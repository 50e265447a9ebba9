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

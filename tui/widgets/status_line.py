"""The status line: queue figures, the chunk rate and an ETA while work runs, a sparkline.

The rate is only shown while something is pending or running (an idle queue
has no rate). The ETA comes from running counters, O(1) per stats event: when
a run of work starts (the queue leaves idle) the line notes the time and the
`done + failed` count; the items finished since, over the time since, give the
rate; the items still pending or running over that rate give the ETA. The
clock is injected (`clock=`), so tests drive it by hand.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static

from ktui.core.models import QueueStats

HISTORY = 40
MIN_ETA_SECONDS = 2.0  # below this much observed work an ETA would be a guess: "estimating…"
SETTLE_SECONDS = 3.0  # the work to do must stop growing this long (a folder walk over) before an ETA


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class RunTracker:
    """Counters of the current run of work (from leaving idle to idle again)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started_at: float | None = None
        self.finished_at_start = 0
        self._total: int | None = None  # finished + remaining at the last figures, and when it grew
        self._grew_at: float | None = None
        self.counting = False  # the work grew within SETTLE_SECONDS: a folder is still being walked

    def eta(self, stats: QueueStats) -> float | None:
        """Seconds left, None while unknown; resets when the queue is idle. None as well
        while the work still grows (`counting`): the time left for what was found so far
        reads 0s whenever indexing keeps up with a folder walk."""
        finished = stats.done + stats.failed
        remaining = stats.pending + stats.running
        now = self.clock()
        total = finished + remaining
        if self._total is not None and total > self._total:
            self._grew_at = now
        self._total = total
        self.counting = self._grew_at is not None and now - self._grew_at < SETTLE_SECONDS
        if remaining == 0:
            self.started_at = None
            self._grew_at, self.counting = None, False
            return None
        if self.started_at is None or finished < self.finished_at_start:
            self.started_at, self.finished_at_start = now, finished
            return None
        elapsed = now - self.started_at
        progressed = finished - self.finished_at_start
        if elapsed < MIN_ETA_SECONDS or progressed <= 0 or self.counting:
            return None
        return remaining * elapsed / progressed


class StatusLine(Horizontal):
    def __init__(self, clock: Callable[[], float] = time.monotonic, **kw) -> None:
        super().__init__(**kw)
        self.rates: deque[float] = deque([0.0] * HISTORY, maxlen=HISTORY)
        self.stats = QueueStats(0, 0, 0, 0, 0.0)
        self.run = RunTracker(clock)
        self.eta: float | None = None
        self.frozen = False  # reproducible screenshots: ignore live figures

    def compose(self) -> ComposeResult:
        yield Static(self._text(), id="queue-figures")
        yield Sparkline(list(self.rates), id="rate")

    @property
    def busy(self) -> bool:
        return self.stats.pending + self.stats.running > 0

    def _text(self) -> Text:
        s = self.stats
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" queue ", "bold reverse")
        t.append(f" pending {s.pending}  running {s.running}  done {s.done}  ")
        t.append(f"failed {s.failed}", "bold red" if s.failed else "")
        if self.busy:
            t.append(f"  {s.chunks_per_second:.1f} chunks/s")
            if self.eta is not None:
                t.append("  ETA " + format_duration(self.eta))
            else:
                t.append("  still finding files" if self.run.counting else "  ETA estimating…")
        else:
            t.append("  idle", "dim")
        if s.recovering is not None:
            t.append(f"  recovering {s.recovering} items…", "yellow")
        if s.recovery_error:
            t.append(f"  recovery stopped: {s.recovery_error}", "bold red")
        if s.paused:
            t.append(f"  paused: {s.paused}", "bold yellow")
        for line in s.slow:
            t.append(f"  {line}", "yellow")
        t.append(" ")
        return t

    def freeze(self, stats: QueueStats) -> None:
        """Show fixed figures and stop updating (snapshot tests: no rates or clocks in the picture)."""
        self.frozen = False
        self.rates.extend([0.0] * HISTORY)
        self.update_stats(stats)
        self.frozen = True

    def update_stats(self, stats: QueueStats) -> None:
        if self.frozen:
            return
        self.stats = stats
        self.eta = self.run.eta(stats)
        self.rates.append(stats.chunks_per_second if self.busy else 0.0)
        self.query_one("#queue-figures", Static).update(self._text())
        self.query_one("#rate", Sparkline).data = list(self.rates)

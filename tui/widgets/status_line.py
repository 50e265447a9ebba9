"""The status line: queue figures and a sparkline of the chunk rate."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static

from ktui.core.models import QueueStats

HISTORY = 40


class StatusLine(Horizontal):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rates: deque[float] = deque([0.0] * HISTORY, maxlen=HISTORY)
        self.stats = QueueStats(0, 0, 0, 0, 0.0)
        self.frozen = False  # reproducible screenshots: ignore live figures

    def compose(self) -> ComposeResult:
        yield Static(self._text(), id="queue-figures")
        yield Sparkline(list(self.rates), id="rate")

    def _text(self) -> Text:
        s = self.stats
        t = Text(no_wrap=True)
        t.append(" queue ", "bold reverse")
        t.append(f" pending {s.pending}  running {s.running}  done {s.done}  ")
        t.append(f"failed {s.failed}", "bold red" if s.failed else "")
        t.append(f"  {s.chunks_per_second:.1f} chunks/s ")
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
        self.rates.append(stats.chunks_per_second)
        self.query_one("#queue-figures", Static).update(self._text())
        self.query_one("#rate", Sparkline).data = list(self.rates)

"""The progress line of `--wait` (tui/cli_progress.py): what it shows (`Figures`,
`describe`) and where it goes (`Progress`): a bar redrawn in place on a terminal, at most
`REDRAW_SECONDS` apart and always narrower than it (`bar_line`), or a summary line at
most every `PLAIN_SECONDS` elsewhere; the clock is injected, so tests need no real time."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from ktui.tui.cli_text import printable

BAR_WIDTH = 24
REDRAW_SECONDS = 0.1  # at most ~10 redraws a second on a terminal
PLAIN_SECONDS = 10.0  # a summary line at most this often off a terminal

Clock = Callable[[], float]


@dataclass(frozen=True)
class Figures:
    """What one progress line shows."""

    done: int
    total: int
    failed: int
    chunks: int
    rate: float | None  # items per second, None until measurable
    elapsed: float
    ocr_pages: tuple[int, int] | None = None  # pages recognised / to recognise in the files OCR is reading
    counting: bool = False  # a folder is being walked, or one found items within SETTLE_SECONDS

    @property
    def eta(self) -> float | None:
        """None while the total still grows: the time left for the items found so far
        (`ETA 0s` when indexing keeps up with the walk) says nothing about the rest."""
        if not self.rate or self.done >= self.total or self.counting:
            return None
        return (self.total - self.done) / self.rate


def duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def describe(f: Figures) -> str:
    """`1,234/20,001 items · 5,678 chunks · OCR 3/12 pages · 123 items/s · ETA 2m41s · 3 failed`."""
    parts = [f"{f.done:,}/{f.total:,} items", f"{f.chunks:,} chunks"]
    if f.ocr_pages is not None:
        done, total = f.ocr_pages
        parts.append(f"OCR {done:,}/{total:,} page{'s' if total != 1 else ''}")
    if f.rate is not None:
        parts.append(f"{f.rate:,.0f} items/s" if f.rate >= 10 else f"{f.rate:.1f} items/s")
    eta = f.eta
    if eta is not None:
        parts.append(f"ETA {duration(eta)}")
    elif f.counting and f.done < f.total:
        parts.append("still finding files")
    if f.failed:
        parts.append(f"{f.failed:,} failed")
    return " · ".join(parts)


FIGURES_ROOM = 64  # cells kept for the figures before the bar gets any: most lines fit in them


def bar_line(figures: Figures, columns: int) -> str:
    """The bar and the figures in `columns` - 3 cells: a longer line wraps, and the next
    redraw (`\\r` and erase line) clears only its last row, so every redraw would leave a
    row behind. The bar's width follows from the terminal's alone (24 cells from 94
    columns, 10 at 80), so it stays put while the figures change length; a line whose
    figures leave no room for it goes without, and figures too long are cut with `…`."""
    text = describe(figures)
    room = columns - 3  # some terminals wrap on the last column, and Ctrl+C echoes `^C` after the line
    if room <= 0:
        return ""
    width = min(BAR_WIDTH, room - FIGURES_ROOM - 3)
    if width >= 4 and len(text) + width + 3 <= room:
        filled = round((figures.done / figures.total if figures.total else 1.0) * width)
        return f"[{'█' * filled}{'░' * (width - filled)}] {text}"
    return text if len(text) <= room else text[: room - 1] + "…"


class Progress:
    """Where progress goes: a bar redrawn in place on a terminal, summary lines elsewhere.

    `clock` (seconds, monotonic) decides when to redraw; tests pass a fake one.
    """

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, clock: Clock = time.monotonic,
                 columns: int | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self._columns = columns  # None: the terminal's width, read at every draw (it may be resized)
        self._last_draw: float | None = None
        self._drawn = False
        self.draws = 0  # how many times progress was written (the tests count them)

    def line(self, text: str) -> None:
        """A line of its own (a failure): the bar is cleared first and redrawn later."""
        self.clear()
        self.stream.write(printable(text) + "\n")
        self.stream.flush()

    def due(self) -> bool:
        """True when it is time for the next progress output."""
        now = self.clock()
        interval = REDRAW_SECONDS if self.tty else PLAIN_SECONDS
        return self._last_draw is None or now - self._last_draw >= interval

    def show(self, figures: Figures, *, force: bool = False) -> None:
        """Draw the bar (terminal) or print a summary line (elsewhere), at most once per interval."""
        if not force and not self.due():
            return
        self._last_draw = self.clock()
        self.draws += 1
        if not self.tty:
            self.stream.write(f"progress: {describe(figures)}\n")
            self.stream.flush()
            return
        self.stream.write("\r\x1b[2K" + bar_line(figures, self.columns()))
        self.stream.flush()
        self._drawn = True

    def columns(self) -> int:
        if self._columns is not None:
            return self._columns
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):  # not a real terminal after all
            return 80
        return columns if columns > 0 else 80  # a pty nobody gave a size

    def clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False


__all__ = ["BAR_WIDTH", "PLAIN_SECONDS", "REDRAW_SECONDS", "Clock", "Figures", "Progress", "bar_line", "describe",
           "duration"]

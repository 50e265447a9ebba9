"""The terminal driver the real TUI runs on: Textual's `LinuxDriver`, made safe for a
terminal that goes away (a closed window, a killed tmux session, a dropped ssh).

When the terminal hangs up, the kernel sends the foreground job SIGHUP *and* SIGCONT,
and every later write to the tty fails with EIO. Textual 8 handles both badly:

* its SIGCONT handler resumes "application mode" whether or not it was suspended: a
  second writer thread (and a second input thread) is started and becomes the
  driver's writer, the first is orphaned;
* a writer thread dies on the first failed write (EIO) and nothing notices: its queue
  holds 30 writes, so the next 30 writes of the event loop fill it and the 31st
  blocks the event loop forever (`Queue.put`). The app's SIGHUP/SIGTERM handlers run
  on that loop, so the process then ignores them, keeps the data directory's lock and
  only SIGKILL ends it.

`KtuiDriver` resumes on SIGCONT only after its own SIGTSTP suspended the app (Ctrl+Z
still works), and its writer thread writes through `TerminalOutput`, which drops
output once the terminal has failed, so the writer keeps draining its queue and
nothing ever waits on a dead terminal. The app then leaves as for `q`: the facade
closes, the lock is released.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver


class TerminalOutput:
    """The stream the writer thread writes to: the real one until a write or flush fails
    (EIO from a hung-up tty, EPIPE, a closed file); from then on output is dropped."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.lost = False

    def write(self, text: str) -> None:
        if self.lost:
            return
        try:
            self._stream.write(text)
        except (OSError, ValueError):
            self.lost = True

    def flush(self) -> None:
        if self.lost:
            return
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self.lost = True

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return True


class KtuiDriver(LinuxDriver):
    """`LinuxDriver` with output that cannot block on a dead terminal and no resume
    without a suspend (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._file = TerminalOutput(self._file or sys.__stderr__)
        self._suspended_by_sigtstp = False

    def _sigtstp_application(self, *args: Any) -> None:
        # the parent suspends application mode only when it will restart it on SIGCONT
        self._suspended_by_sigtstp = self._auto_restart
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        # a SIGCONT with no SIGTSTP before it (the kernel's, with SIGHUP, when the
        # terminal hangs up; a stray `kill -CONT`) must not start a second writer
        if not self._suspended_by_sigtstp:
            return
        self._suspended_by_sigtstp = False
        super()._sigcont_application(*args)

"""The running counters behind `--wait`'s progress (tui/cli_progress.py), each change O(1):
`Tally` (statuses of the followed items), `PageCounter` (OCR pages of the files being
recognised) and `RateMeter` (items per second over the last seconds)."""

from __future__ import annotations

from collections import deque

from ktui.core.models import ItemStatus

RATE_WINDOW_SECONDS = 15.0  # the rate (and so the ETA) is measured over this much recent time


class Tally:
    """Statuses of the followed items with running counters: every change is O(1)."""

    def __init__(self) -> None:
        self.status: dict[str, ItemStatus] = {}
        self.completed = 0
        self.failed_ids: dict[str, None] = {}  # insertion-ordered set
        self._base_of: dict[str, str] = {}
        self._by_base: dict[str, set[str]] = {}  # a removed base takes its items with it

    @property
    def total(self) -> int:
        return len(self.status)

    @property
    def failed(self) -> int:
        return len(self.failed_ids)

    @property
    def done(self) -> int:
        return self.completed + len(self.failed_ids)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.status

    def track(self, item_id: str, status: ItemStatus, base_id: str | None = None) -> None:
        """Start following an item (a no-op for one already followed)."""
        if item_id not in self.status:
            self.status[item_id] = ItemStatus.IDLE
            self.set(item_id, status)
            if base_id is not None:
                self._base_of[item_id] = base_id
                self._by_base.setdefault(base_id, set()).add(item_id)

    def set(self, item_id: str, status: ItemStatus) -> bool:
        """Record a followed item's new status; True when it has just failed."""
        old = self.status.get(item_id)
        if old is None:
            return False
        self._count(item_id, old, -1)
        self.status[item_id] = status
        self._count(item_id, status, +1)
        return status == ItemStatus.FAILED and old != ItemStatus.FAILED

    def remove(self, item_id: str) -> None:
        old = self.status.pop(item_id, None)
        if old is not None:
            self._count(item_id, old, -1)
        base_id = self._base_of.pop(item_id, None)
        if base_id is not None:
            self._by_base[base_id].discard(item_id)

    def remove_base(self, base_id: str) -> list[str]:
        """Stop following every item of a deleted base (its rows went without ItemsRemoved);
        the ids dropped. O(items of that base), once per deleted base."""
        gone = list(self._by_base.pop(base_id, ()))
        for item_id in gone:
            self._base_of.pop(item_id, None)
            self.remove(item_id)
        return gone

    def _count(self, item_id: str, status: ItemStatus, sign: int) -> None:
        if status == ItemStatus.COMPLETED:
            self.completed += sign
        elif status == ItemStatus.FAILED:
            if sign > 0:
                self.failed_ids[item_id] = None
            else:
                self.failed_ids.pop(item_id, None)


class PageCounter:
    """OCR pages of the files being recognised right now, summed with running totals (O(1)
    per event): a file's count is replaced by its next report and dropped when it moves on."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, int]] = {}
        self.done = 0
        self.total = 0

    def set(self, item_id: str, pages: tuple[int, int] | None) -> None:
        old = self.pages.pop(item_id, None)
        if old is not None:
            self.done -= old[0]
            self.total -= old[1]
        if pages is not None:
            self.pages[item_id] = pages
            self.done += pages[0]
            self.total += pages[1]

    def figures(self) -> tuple[int, int] | None:
        return (self.done, self.total) if self.pages else None


class RateMeter:
    """Items per second over the last `window` seconds (samples are taken at redraws, so
    the window holds at most a few hundred of them)."""

    def __init__(self, window: float = RATE_WINDOW_SECONDS):
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def sample(self, now: float, done: int) -> float | None:
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()
        first_t, first_done = self._samples[0]
        if now - first_t < 0.5:
            return None  # too early to say
        return max(0.0, (done - first_done) / (now - first_t))


__all__ = ["RATE_WINDOW_SECONDS", "PageCounter", "RateMeter", "Tally"]

"""`--wait` progress: O(1) counters, time-batched output on a fake clock, and `follow`
on a real service (a real folder, a real embedding server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import io
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.config import OcrSettings
from ktui.core.models import ItemChanged, ItemInput, ItemPhase, ItemsAdded, ItemStatus, Resync
from ktui.tui.cli_progress import (
    BAR_WIDTH,
    PLAIN_SECONDS,
    REDRAW_SECONDS,
    SETTLE_SECONDS,
    Figures,
    Follower,
    PageCounter,
    Progress,
    Tally,
    bar_line,
    describe,
    duration,
    follow,
)
from tests.support.embedding_server import embedding_server_fixture
from tests.support.ocr_gate import GatedTesseract
from tests.support.ocr_pages import PageSpec, page_text, render_lines, save_multipage
from tests.support.services import open_service, write_files

server = embedding_server_fixture(16)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


STATUSES = st.sampled_from(list(ItemStatus))
OPS = st.lists(
    st.tuples(st.sampled_from(["track", "set", "remove", "remove_base"]), st.integers(0, 6), STATUSES), max_size=60
)


@given(OPS)
def test_tally_counters_always_match_a_recount(ops):
    tally = Tally()
    for op, n, status in ops:
        item_id = f"i{n}"
        if op == "track":
            tally.track(item_id, status, f"b{n % 2}")
        elif op == "set":
            tally.set(item_id, status)
        elif op == "remove":
            tally.remove(item_id)
        else:
            gone = tally.remove_base(f"b{n % 2}")
            assert not any(i in tally for i in gone)
            assert not any(int(i[1:]) % 2 == n % 2 for i in tally.status)  # none of that base is left
        counts = Counter(tally.status.values())
        assert tally.total == len(tally.status)
        assert tally.completed == counts[ItemStatus.COMPLETED]
        assert tally.failed == counts[ItemStatus.FAILED]
        assert set(tally.failed_ids) == {i for i, s in tally.status.items() if s == ItemStatus.FAILED}


def test_a_removed_base_takes_its_followed_items_with_it():
    tally = Tally()
    tally.track("a", ItemStatus.PROCESSING, "doomed")
    tally.track("b", ItemStatus.COMPLETED, "doomed")
    tally.track("c", ItemStatus.PROCESSING, "kept")
    assert sorted(tally.remove_base("doomed")) == ["a", "b"]
    assert tally.total == 1 and tally.completed == 0 and "c" in tally
    assert tally.remove_base("doomed") == []  # once


def test_set_reports_a_new_failure_once_and_ignores_unfollowed_items():
    tally = Tally()
    tally.track("a", ItemStatus.PROCESSING)
    assert tally.set("a", ItemStatus.FAILED) is True
    assert tally.set("a", ItemStatus.FAILED) is False  # already failed
    assert tally.set("stranger", ItemStatus.FAILED) is False and "stranger" not in tally


def figures(done: int, total: int = 100, **kw) -> Figures:
    return Figures(done=done, total=total, failed=kw.get("failed", 0), chunks=kw.get("chunks", 0),
                   rate=kw.get("rate"), elapsed=0.0)


def test_a_terminal_is_redrawn_at_most_once_per_interval_of_the_clock():
    out, clock = io.StringIO(), FakeClock()
    progress = Progress(out, tty=True, clock=clock)
    for i in range(500):  # 500 events within one interval
        progress.show(figures(i))
        clock.now += REDRAW_SECONDS / 1000
    assert progress.draws == 1
    clock.now += REDRAW_SECONDS
    progress.show(figures(7))
    assert progress.draws == 2
    progress.show(figures(8), force=True)  # the final state is always drawn
    assert progress.draws == 3
    text = out.getvalue()
    assert text.count("\r\x1b[2K") == 3 and "█" in text and "8/100 items" in text and "\n" not in text
    progress.line("failed  file b.md: boom")
    assert out.getvalue().endswith("\r\x1b[2Kfailed  file b.md: boom\n")


def test_off_a_terminal_a_summary_line_is_printed_now_and_then():
    out, clock = io.StringIO(), FakeClock()
    progress = Progress(out, tty=False, clock=clock)
    for i in range(100):
        progress.show(figures(i))
        clock.now += PLAIN_SECONDS / 40
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 0, 10 s and 20 s of fake time
    assert all(line.startswith("progress: ") for line in lines) and "\r" not in out.getvalue()


def test_the_line_shows_items_chunks_rate_eta_and_failures():
    text = describe(figures(25, 100, chunks=1234, rate=25.0, failed=2))
    assert text == "25/100 items · 1,234 chunks · 25 items/s · ETA 3s · 2 failed"
    assert "ETA" not in describe(figures(100, 100, rate=3.0))
    assert "items/s" not in describe(figures(1))  # no rate until one can be measured
    assert [duration(s) for s in (5, 65, 7322)] == ["5s", "1m05s", "2h02m"]


class CountingService:
    """The real facade, counting the per-item lookups `follow` makes."""

    def __init__(self, ks):
        self._ks = ks
        self.lookups = 0

    async def get_item(self, item_id):
        self.lookups += 1
        return await self._ks.get_item(item_id)

    def __getattr__(self, name):
        return getattr(self._ks, name)


async def test_follow_counts_a_folder_without_looking_items_up(tmp_path, server):
    files = {f"d{i % 3}/n{i}.md": f"# Note {i}\n\nOtters number {i} float.\n" for i in range(30)}
    files["binary.md"] = "\x00\x01\x02" * 40  # not text: it fails (an empty file would be skipped)
    folder = write_files(tmp_path / "notes", files)
    async with open_service(tmp_path / "data", server.url) as real:
        ks = CountingService(real)
        base = await ks.create_base("Notes")
        sub = ks.subscribe()
        roots = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        out = io.StringIO()
        outcome = await follow(ks, sub, roots, Progress(out, tty=True))
        sub.close()
        # the folder, three sub-folders, 31 files; one binary file fails (and so its folder)
        assert (outcome.total, outcome.completed) == (35, 33)
        assert sorted(i.type.value for i in outcome.failed) == ["directory", "file"]
        assert ks.lookups == 2 * len(outcome.failed)  # each failure: named as it happened, and at the end
        assert "failed  file binary.md" in out.getvalue() and "35/35 items" in out.getvalue()

        # a refresh follows what it reads again below the folder: the two changed files
        # and their folders, not the unchanged files
        (folder / "d1" / "n1.md").write_text("# Note 1\n\nOtters changed their mind.\n")
        (folder / "binary.md").write_text("no longer binary\n")
        sub = ks.subscribe()
        fresh = await ks.reindex_items(base.id, [roots[0].id])
        outcome = await follow(ks, sub, fresh, Progress(io.StringIO(), tty=False))
        sub.close()
        assert (outcome.total, outcome.completed, outcome.failed) == (4, 4, [])
        assert ks.lookups == 4  # no lookups for the refresh


async def test_follow_ends_cleanly_when_the_followed_base_is_deleted_mid_way(tmp_path, server):
    """A base deleted (or an interrupted import discarded by another process) while we
    wait: its items are no longer work, so the wait ends `ok` instead of counting them
    unfinished (the rows go with the base, without ItemsRemoved)."""
    try:
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Doomed")
            server.faults.delay(8)  # the notes stay in flight until the base is gone (under the 10 s timeout)
            sub = ks.subscribe()
            roots = await ks.add_items(base.id, [ItemInput("note", {"content": f"Otter note {i}."}) for i in range(3)])
            following = asyncio.ensure_future(follow(ks, sub, roots, Progress(io.StringIO(), tty=False)))
            await asyncio.sleep(0)
            assert not following.done()
            await ks.delete_base(base.id)
            outcome = await asyncio.wait_for(following, 60)
            sub.close()
    finally:
        server.faults.clear()
    assert outcome.ok and (outcome.total, outcome.unfinished) == (0, 0)


async def test_after_a_resync_the_followed_statuses_are_read_again(tmp_path, server):
    """Events lost in a gap (a shared store's listener reconnected: Resync) cannot leave
    the count stale: the statuses are read from the catalogue, a folder's children too."""
    folder = write_files(tmp_path / "notes", {f"n{i}.md": f"# Note {i}\n\nOtters {i}.\n" for i in range(3)})
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Notes")
        roots = await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)}),
                                             ItemInput("note", {"content": "A lone otter."})])
        assert await ks.wait_idle(timeout=60)
        follower = Follower(ks, Progress(io.StringIO(), tty=False), [base.id])
        for root in roots:  # what a follower that missed every event would still believe
            follower.tally.track(root.id, ItemStatus.PROCESSING, base.id)
        follower.apply(Resync())
        assert follower.missed
        await follower.reread(roots)
    assert not follower.missed and follower.finished
    assert (follower.tally.total, follower.tally.completed) == (5, 5)  # the folder, its 3 files, the note


@given(st.lists(st.tuples(st.integers(0, 4), st.none() | st.tuples(st.integers(0, 50), st.integers(1, 50))),
                max_size=60))
def test_ocr_page_counter_always_matches_a_recount(reports):
    counter = PageCounter()
    latest: dict[str, tuple[int, int]] = {}
    for n, pages in reports:
        counter.set(f"i{n}", pages)
        if pages is None:
            latest.pop(f"i{n}", None)
        else:
            latest[f"i{n}"] = pages
        expected = (sum(d for d, _ in latest.values()), sum(t for _, t in latest.values())) if latest else None
        assert counter.figures() == expected


def test_the_line_counts_ocr_pages_while_scans_are_read():
    line = describe(Figures(done=1, total=4, failed=0, chunks=3, rate=None, elapsed=1.0, ocr_pages=(7, 12)))
    assert line == "1/4 items · 3 chunks · OCR 7/12 pages"
    assert describe(Figures(0, 1, 0, 0, None, 0.0, ocr_pages=(0, 1))) == "0/1 items · 0 chunks · OCR 0/1 page"


class TickingClock(FakeClock):
    """Each reading is one summary interval later: every pass of `follow` prints a line."""

    def __call__(self) -> float:
        self.now += PLAIN_SECONDS
        return self.now


@pytest.mark.slow
async def test_add_wait_counts_the_pages_of_a_scan_while_ocr_reads_it(tmp_path, server):
    pages = [render_lines(page_text(seed, lines=3, words_per_line=6), PageSpec(height=360)) for seed in (1, 2, 3)]
    scan = save_multipage([p.image for p in pages], tmp_path / "fax.tiff")
    tesseract = GatedTesseract(tmp_path / "bin", hold=2)  # page 2 waits until we have seen page 1 counted
    async with open_service(tmp_path / "data", server.url, ocr=OcrSettings(tesseract=str(tesseract.command))) as ks:
        base = await ks.create_base("Scans")
        sub = ks.subscribe()
        roots = await ks.add_items(base.id, [ItemInput("file", {"path": str(scan)})])
        out = io.StringIO()
        following = asyncio.ensure_future(follow(ks, sub, roots, Progress(out, tty=False, clock=TickingClock())))
        try:
            while "OCR 1/3 pages" not in out.getvalue():
                assert not following.done(), out.getvalue()
                await asyncio.sleep(0.02)
        finally:
            await tesseract.release()
        outcome = await following
        sub.close()
    assert outcome.ok and outcome.completed == 1
    assert "progress: 0/1 items · 0 chunks · OCR 1/3 pages" in out.getvalue()
    assert "OCR 4/" not in out.getvalue()  # never more pages than the file has


async def test_no_eta_while_a_folder_walk_still_adds_items(tmp_path, server):
    """While the total grows (a folder being walked) the line says so instead of an ETA for
    the items found so far (`ETA 0s` when indexing keeps up with the walk); once the total
    has stayed put for SETTLE_SECONDS of the (fake) clock, the ETA is back."""
    clock = FakeClock()
    async with open_service(tmp_path / "data", server.url) as ks:
        follower = Follower(ks, Progress(io.StringIO(), tty=False, clock=clock), ["b"])
        follower.tally.track("folder", ItemStatus.PROCESSING, "b")
        assert not follower.figures().counting  # the roots' own count
        clock.now += 1
        follower.apply(ItemsAdded("b", tuple(f"f{i}" for i in range(10)), "folder"))
        for i in range(5):
            follower.apply(ItemChanged("b", f"f{i}", ItemStatus.COMPLETED, None, None))
        growing = follower.figures()
        assert growing.counting and growing.rate and growing.eta is None
        assert describe(growing).endswith("5/11 items · 0 chunks · 5.0 items/s · still finding files")
        clock.now += SETTLE_SECONDS - 0.1
        assert follower.figures().counting
        clock.now += 0.2
        settled = follower.figures()
        assert not settled.counting and settled.eta is not None and "ETA" in describe(settled)

        # a folder being walked says so before it has found anything, however long the walk
        follower.tally.track("walked", ItemStatus.PROCESSING, "b")
        follower.apply(ItemChanged("b", "walked", ItemStatus.PROCESSING, ItemPhase.PREPARING, None))
        clock.now += 10 * SETTLE_SECONDS
        assert follower.figures().counting and "still finding files" in describe(follower.figures())
        follower.apply(ItemChanged("b", "walked", ItemStatus.PROCESSING, None, None))  # walked: waits on its files
        assert not follower.figures().counting

        # a folder just added: its `processing` as it is queued does not end the walk it is
        # waiting for; finding its files does (then the settling above)
        follower.tally.track("fresh", ItemStatus.PROCESSING, "b")
        follower.unwalked.add("fresh")
        follower.apply(ItemChanged("b", "fresh", ItemStatus.PROCESSING, None, None))
        assert follower.figures().counting
        follower.apply(ItemsAdded("b", ("n1", "n2"), "fresh"))
        clock.now += SETTLE_SECONDS + 0.1
        assert not follower.figures().counting

        # items that existed below a followed folder (`ktui wait`, a refresh) are counted as
        # they change, but finding them is no walk: the ETA stays
        follower.below = {"old1", "old2"}
        follower.apply(ItemChanged("b", "old1", ItemStatus.COMPLETED, None, None))
        assert follower.tally.total == 16 and not follower.figures().counting


@given(st.integers(0, 10**7), st.integers(0, 10**7), st.integers(0, 10**5), st.integers(1, 400))
def test_the_bar_never_reaches_the_last_column(done, total, failed, columns):
    """A line as wide as the terminal wraps, and a redraw (\\r, erase line) clears only its
    last row: every redraw would leave a row behind on an 80-column terminal."""
    figures = Figures(done=min(done, total), total=total, failed=failed, chunks=done * 3, rate=12345.0,
                      elapsed=1.0, ocr_pages=(done % 100, 99))
    line = bar_line(figures, columns)
    assert len(line) <= max(0, columns - 3)
    if len(describe(figures)) + BAR_WIDTH + 3 <= columns - 3 and columns >= 94:  # room for all of it
        assert line.startswith("[") and line.count("█") + line.count("░") == BAR_WIDTH and "…" not in line


def test_the_bar_keeps_its_width_while_the_figures_change_length():
    """Its width follows from the terminal's alone: 10 cells on 80 columns whatever the
    figures say; a line whose figures leave no room goes without it; too long, cut."""
    widths = set()
    for done, rate in ((0, None), (512, 210.0), (7104, 1299.0), (19852, 1885.0)):
        line = bar_line(Figures(done=done, total=20001, failed=0, chunks=done, rate=rate, elapsed=5.0), 80)
        widths.add(line.count("█") + line.count("░"))
        assert len(line) <= 77
    assert widths == {10}
    assert bar_line(Figures(done=5, total=10, failed=0, chunks=5, rate=1.0, elapsed=5.0), 120).count("░") == BAR_WIDTH // 2
    long = Figures(done=5120, total=20001, failed=2, chunks=5118, rate=312.0, elapsed=9.0)
    assert bar_line(long, 80) == "5,120/20,001 items · 5,118 chunks · 312 items/s · ETA 48s · 2 failed"
    narrow = bar_line(long, 40)  # no room for a bar: the figures, cut
    assert narrow.startswith("5,120/20,001 items") and narrow.endswith("…") and len(narrow) == 37

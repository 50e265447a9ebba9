"""Chunks longer than the model's input window are recorded at indexing and shown.

Real service, real SQLite, real files, and the real embedding server on 127.0.0.1;
the model's window is made small (32 tokens) by a settings override, the way a user
would describe a model ktui does not know.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.config import ModelOverride
from ktui.core.embeddings.profiles import window_overflow
from ktui.core.models import ItemInput, WindowOverflow
from ktui.tui.screens.item_detail import facts_text, gather_facts
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import open_service, write_files

DIMS = 32
WINDOW = 32
MODEL = "fake::tiny-window"
server = embedding_server_fixture(DIMS, scope="module")

LONG = " ".join(f"otters{i % 7} float on rivers and hold paws while they sleep" for i in range(40))


def _overrides() -> dict:
    return {"models": {MODEL: ModelOverride(window_tokens=WINDOW)}}


@pytest.mark.slow
async def test_chunks_past_the_window_are_recorded_shown_and_cleared_by_a_fitting_chunk_size(
    tmp_path: Path, server
) -> None:
    root = write_files(tmp_path / "docs", {"long.txt": LONG})
    async with open_service(tmp_path / "data", server.url, **_overrides()) as ks:
        base = await ks.create_base("tight", MODEL, chunk_size=100, chunk_overlap=10)
        added = await ks.add_items(base.id, [ItemInput("file", {"path": str(root / "long.txt")}),
                                             ItemInput("note", {"content": "a short note about otters"})])
        assert await ks.wait_idle(timeout=60)
        file_id, note_id = added[0].id, added[1].id
        over = await ks.items_over_window(base.id)
        assert [i.id for i in over] == [file_id]  # the short note fits
        report = WindowOverflow.from_dict(over[0].data.window_overflow)
        assert report is not None and report.window_tokens == WINDOW
        chunks = await ks.list_item_chunks(base.id, file_id)
        counts = [c.metadata["token_count"] for c in chunks]
        assert report.chunks == len(chunks) and report.over == sum(t > WINDOW for t in counts) >= 1
        assert report.longest == max(counts) > WINDOW and 0 < report.cut_share < 1
        assert (await ks.get_item(note_id)).data.window_overflow is None

        detail = facts_text(await gather_facts(ks, over[0])).plain  # the TUI's item detail
        assert f"exceed the {WINDOW}-token window" in detail or f"exceeds the {WINDOW}-token window" in detail
        assert "Window" in detail
        assert "Window" not in facts_text(await gather_facts(ks, await ks.get_item(note_id))).plain

        await ks.update_base(base.id, {"chunk_size": 25, "chunk_overlap": 5})
        await ks.reindex_items(base.id, [file_id], force=True)
        assert await ks.wait_idle(timeout=60)
        assert await ks.items_over_window(base.id) == []
        assert (await ks.get_item(file_id)).data.window_overflow is None


@pytest.mark.slow
async def test_a_new_base_on_a_small_window_model_gets_chunks_that_fit(tmp_path: Path, server) -> None:
    root = write_files(tmp_path / "docs", {"long.txt": LONG})
    async with open_service(tmp_path / "data", server.url, **_overrides()) as ks:
        base = await ks.create_base("fits", MODEL)
        assert base.chunk_size <= WINDOW and base.chunk_overlap < base.chunk_size
        assert ks.model_profile(MODEL).window_warning(base.chunk_size) is None
        await ks.add_items(base.id, [ItemInput("file", {"path": str(root / "long.txt")})])
        assert await ks.wait_idle(timeout=60)
        assert await ks.items_over_window(base.id) == []
        chunks = await ks.list_item_chunks(base.id, (await ks.list_items(base.id)).items[0].id)
        assert len(chunks) > 1 and max(c.metadata["token_count"] for c in chunks) <= WINDOW


@given(st.lists(st.integers(0, 5000), max_size=50), st.one_of(st.none(), st.integers(1, 4000)))
def test_window_overflow_invariants(counts: list[int], window: int | None) -> None:
    report = window_overflow(counts, window)
    if window is None or all(t <= window for t in counts):
        assert report is None
        return
    assert report is not None
    assert report.chunks == len(counts) and report.over == sum(t > window for t in counts)
    assert report.longest == max(counts) > window and 0 < report.cut_share <= 1
    assert WindowOverflow.from_dict(report.as_dict()) == report
    assert str(report.over) in report.describe()

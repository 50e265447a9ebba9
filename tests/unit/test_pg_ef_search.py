"""hnsw.ef_search grows with the base so HNSW recall holds at a million rows (issue 20:
recall@10 at 1M x 384 was 0.726 with a fixed 100; docs/postgres.md has the curve)."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ktui.core.store.postgres.store import EF_SEARCH_MAX, PgTuning, ef_search_for  # noqa: E402

TUNING = PgTuning()


def test_small_and_middle_bases_keep_the_floor() -> None:
    assert ef_search_for(10_000, 10, TUNING) == 100
    assert ef_search_for(100_000, 10, TUNING) == 100  # recall@10 1.000 there at 100


def test_a_million_rows_search_wider() -> None:
    assert ef_search_for(1_000_000, 10, TUNING) == 714  # measured 0.955 at 700


def test_k_above_the_floor_wins_and_pgvectors_limit_caps() -> None:
    assert ef_search_for(10_000, 200, TUNING) == 200
    assert ef_search_for(50_000_000, 10, TUNING) == EF_SEARCH_MAX


@given(st.integers(0, 10**9), st.integers(1, EF_SEARCH_MAX), st.integers(1, 10**6))
def test_never_below_k_or_the_floor_never_above_the_limit(rows: int, k: int, per: int) -> None:
    tuning = PgTuning(ef_search_rows=per)
    ef = ef_search_for(rows, k, tuning)
    assert max(k, tuning.ef_search) <= ef <= EF_SEARCH_MAX
    assert ef_search_for(rows + per, k, tuning) >= ef  # monotone in the base's size

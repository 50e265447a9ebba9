"""Reciprocal-rank fusion: the exact formula, weighting, ties and limits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.search import reciprocal_rank_fusion


def ranked(*ids: str) -> list[tuple[str, float]]:
    return [(i, 1.0 - n / 100) for n, i in enumerate(ids)]


def test_scores_follow_the_rrf_formula() -> None:
    out = dict(
        reciprocal_rank_fusion(
            ranked("a", "b", "c"), ranked("c", "a"), k=60, alpha=0.5, limit=10
        )
    )
    assert out["a"] == pytest.approx(0.5 / 61 + 0.5 / 62)
    assert out["b"] == pytest.approx(0.5 / 62)
    assert out["c"] == pytest.approx(0.5 / 63 + 0.5 / 61)
    assert list(out) == ["a", "c", "b"]


def test_alpha_one_is_the_vector_order_and_zero_the_keyword_order() -> None:
    vec, kw = ranked("a", "b", "c"), ranked("c", "b", "d")
    only_vec = reciprocal_rank_fusion(vec, kw, alpha=1.0, limit=10)
    assert [d for d, _ in only_vec][:3] == ["a", "b", "c"]
    assert dict(only_vec)["d"] == 0.0
    only_kw = reciprocal_rank_fusion(vec, kw, alpha=0.0, limit=10)
    assert [d for d, _ in only_kw][:3] == ["c", "b", "d"]


def test_alpha_tilts_the_fusion() -> None:
    vec, kw = ranked("v", "y"), ranked("k", "z")
    assert reciprocal_rank_fusion(vec, kw, alpha=0.7, limit=1)[0][0] == "v"
    assert reciprocal_rank_fusion(vec, kw, alpha=0.3, limit=1)[0][0] == "k"


def test_ties_break_on_vector_rank_then_id() -> None:
    # "a" is vector #1 + keyword #2, "b" keyword #1 + vector #2: equal scores.
    out = reciprocal_rank_fusion(ranked("a", "b"), ranked("b", "a"), alpha=0.5, limit=2)
    assert out[0][1] == pytest.approx(out[1][1])
    assert [d for d, _ in out] == ["a", "b"]


def test_limit_duplicates_and_empty_inputs() -> None:
    assert reciprocal_rank_fusion([], [], limit=5) == []
    assert reciprocal_rank_fusion(ranked("a"), [], limit=0) == []
    out = reciprocal_rank_fusion(ranked("a", "a", "b"), [], alpha=1.0, limit=5)
    assert [d for d, _ in out] == ["a", "b"]
    assert dict(out)["b"] == pytest.approx(1 / 63)  # duplicates keep their rank slot
    assert (
        len(reciprocal_rank_fusion(ranked(*"abcdefgh"), ranked(*"hgfedcba"), limit=3))
        == 3
    )


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_alpha_out_of_range_is_refused(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        reciprocal_rank_fusion([], [], alpha=alpha, limit=3)


ids = st.lists(st.sampled_from("abcdefghijklmnop"), max_size=12)


@given(ids, ids, st.floats(0, 1), st.integers(1, 20))
def test_fused_ranking_is_sorted_bounded_and_from_the_inputs(
    v: list[str], w: list[str], alpha: float, limit: int
) -> None:
    out = reciprocal_rank_fusion(ranked(*v), ranked(*w), alpha=alpha, limit=limit)
    scores = [s for _, s in out]
    assert scores == sorted(scores, reverse=True)
    assert len(out) == min(limit, len(set(v) | set(w)))
    assert {d for d, _ in out} <= set(v) | set(w)
    assert all(0 <= s <= 1 / 61 + 1e-12 for s in scores)


def test_minmax_fusion_keeps_a_clear_winner_of_one_side_first() -> None:
    from ktui.core.search.fusion import fuse_scores

    vector = [("answer", 0.9), ("x", 0.31), ("y", 0.30), ("z", 0.29)]
    keyword = [("w", 9.0), ("x", 5.0), ("y", 4.9), ("z", 4.8), ("v", 1.0)]
    assert reciprocal_rank_fusion(vector, keyword, alpha=0.5, limit=1)[0][0] == "x"  # mediocre on both wins RRF
    fused = fuse_scores(vector, keyword, alpha=0.5, limit=5, normalise="minmax")
    assert fuse_scores(vector, keyword, alpha=0.5, limit=1, normalise="max")[0][0] in {"answer", "w"}
    assert fused[0][0] == "answer" and all(0.0 <= s <= 1.0 for _, s in fused)
    assert fuse_scores(vector, keyword, alpha=0.0, limit=1)[0][0] == "w"
    assert fuse_scores([], [], alpha=0.5, limit=3) == [] and fuse_scores(vector, [], alpha=0.5, limit=0) == []
    assert fuse_scores([("a", 1.0)], [("a", 2.0)], alpha=0.3, limit=2) == [("a", pytest.approx(1.0))]


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(-10, 10)), max_size=12),
       st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0, 30)), max_size=12),
       st.floats(0, 1), st.integers(1, 10))
def test_minmax_fusion_is_a_prefix_whatever_the_limit(v, k, alpha, limit) -> None:
    from ktui.core.search.fusion import fuse_scores

    v, k = sorted(v, key=lambda p: -p[1]), sorted(k, key=lambda p: -p[1])
    full = fuse_scores(v, k, alpha=alpha, limit=20)
    assert fuse_scores(v, k, alpha=alpha, limit=limit) == full[:limit]
    assert all(0.0 <= s <= 1.0 + 1e-9 for _, s in full)

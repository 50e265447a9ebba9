"""Relevance 0..1 next to raw scores."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ktui.core.search.relevance import consistent_with_rank, cosine_relevance, keyword_relevance, rerank_relevance


def test_keyword_relevance_is_the_share_of_query_terms_present() -> None:
    assert keyword_relevance("epoll event notification", "The epoll API: event notification facility") == 1.0
    assert keyword_relevance("epoll event queue", "The epoll API and its event list") == round(2 / 3, 4)
    assert keyword_relevance('"event notification" epoll', "notification of an event") == 0.0
    assert keyword_relevance("乌龙茶", "我喜欢乌龙茶") == 1.0 and keyword_relevance("云南", "福建的茶") == 0.0
    assert keyword_relevance("???", "anything") == 0.0


def test_cosine_and_rerank_relevance_stay_within_0_and_1() -> None:
    assert cosine_relevance(-0.2) == 0.0 and cosine_relevance(0.42) == 0.42 and cosine_relevance(1.0000001) == 1.0
    assert rerank_relevance(0.7) == 0.7 and rerank_relevance(0.0) == 0.0
    assert rerank_relevance(5.0) > 0.99 and rerank_relevance(-5.0) < 0.01


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_score_gives_a_relevance_in_range(x: float) -> None:
    for r in (cosine_relevance(x), rerank_relevance(x)):
        assert 0.0 <= r <= 1.0


@given(st.text(max_size=60), st.text(max_size=200))
def test_any_text_gives_a_keyword_relevance_in_range(query: str, text: str) -> None:
    assert 0.0 <= keyword_relevance(query, text) <= 1.0


def test_relevance_never_rises_down_the_ranking() -> None:
    # a fused ranking that puts a 0.47 above a 0.79 (found trying the CLI on real files)
    assert consistent_with_rank([0.82, 0.47, 0.46, 0.79, 0.78]) == [0.82, 0.47, 0.46, 0.46, 0.46]
    assert consistent_with_rank([]) == []


@given(st.lists(st.floats(0.0, 1.0), max_size=50), st.integers(0, 50))
def test_rank_consistent_relevance_is_capped_and_keeps_prefixes(values: list[float], k: int) -> None:
    shown = consistent_with_rank(values)
    assert all(a >= b for a, b in zip(shown, shown[1:], strict=False))  # never rises down the list
    assert all(s <= v for s, v in zip(shown, values, strict=True))  # only ever capped
    assert consistent_with_rank(values[:k]) == shown[:k]  # asking for more changes no earlier figure
    if values == sorted(values, reverse=True):
        assert shown == values

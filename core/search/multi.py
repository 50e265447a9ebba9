"""Merging the answers of several bases into one ranked list.

Raw scores of different bases are not comparable (other models, other modes), so
results are merged by their 0..1 relevance (core.search.relevance), ties broken by
their rank within their own base, then by base order. Each result names its base
and keeps its rank within it (`base_rank`); each base that degraded or lost its
reranker is a `BaseSearchNotice`.
"""

from __future__ import annotations

from dataclasses import replace

from ktui.core.models import BaseSearchNotice, KnowledgeBase, SearchResponse


def merge_responses(answers: list[tuple[KnowledgeBase, SearchResponse]], top_k: int) -> SearchResponse:
    pooled = []
    for order, (_base, response) in enumerate(answers):
        for result in response.results:
            pooled.append((-result.relevance, result.rank, order, result))
    pooled.sort(key=lambda p: p[:3])
    results = [replace(r, rank=rank, base_rank=r.rank) for rank, (*_, r) in enumerate(pooled[:top_k], start=1)]
    reasons = [f"{base.name}: {response.reason}" for base, response in answers if response.reason]
    notices = tuple(BaseSearchNotice(base.id, base.name, response.degraded, response.reason)
                    for base, response in answers if response.reason)
    return SearchResponse(
        results,
        degraded=any(response.degraded for _, response in answers),
        reason="; ".join(reasons) if reasons else None,
        notices=notices,
    )

"""A 0..1 relevance for every result, next to its raw score, that a person can compare.

Raw scores live on unrelated scales (a cosine, a negated bm25, a fused score, a
reranker's logit), so each result also carries a relevance in 0..1 built from
quantities a person can reason about, the same way in every base:

* vector (`cosine`): the cosine similarity, clipped to 0..1;
* keyword (`bm25`): the share of the query's terms (words, quoted phrases, CJK
  bigrams; stop words excluded as in the query) that the chunk contains;
* hybrid: ``alpha * vector relevance + (1 - alpha) * keyword relevance`` with the
  base's alpha (a chunk the vector side did not list contributes 0 there);
* rerank: the reranker's score when it is already 0..1, else its logistic.

So 0.8 in one base means about what 0.8 means in another with the same model, and
results of several bases can be merged by it.

The ranking itself comes from the scores (fusion, bm25, rerank), so a figure built
on other quantities could rise down the list (a hybrid 0.47 above a 0.79: the fused
ranking weighs bm25, the figure the share of terms). `consistent_with_rank` caps
each relevance at the lowest one ranked above it — "no more relevant than what the
ranking put above it" — so the figure never rises down the list, and merging several
bases by it keeps each base's own order. It caps by what is above, never lifts by
what is below: the first k figures stay those of a search for more results.
"""

from __future__ import annotations

import math

from .keyword import index_text, query_terms, variants, word_tokens

DIGITS = 4  # every relevance is shown to 4 decimals (0.8713), whatever the mode and the front end


def _shown(x: float) -> float:
    return round(x, DIGITS)


def _clip(x: float) -> float:
    if not math.isfinite(x):
        return 0.0
    return min(1.0, max(0.0, x))


def cosine_relevance(cosine: float) -> float:
    return _shown(_clip(cosine))


def keyword_relevance(query: str, text: str) -> float:
    terms = query_terms(query)
    if not terms:
        return 0.0
    tokens = word_tokens(index_text(text) or text)
    joined = " " + " ".join(tokens) + " "
    present = set(tokens)
    hits = 0
    for term in terms:
        if len(term) == 1:
            word = term[0]
            hits += any(form in present for form in variants(word)) or (
                len(word) == 1 and any(t.startswith(word) for t in tokens)
            )
        else:
            hits += (" " + " ".join(term) + " ") in joined
    return _shown(hits / len(terms))


def rerank_relevance(score: float) -> float:
    if not math.isfinite(score):
        return 0.0
    if 0.0 <= score <= 1.0:
        return _shown(score)
    return _shown(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score)))))


def hybrid_relevance(alpha: float, vector: float, keyword: float) -> float:
    """``alpha * vector + (1 - alpha) * keyword``, rounded as the sides are (their sum is not)."""
    return _shown(alpha * vector + (1 - alpha) * keyword)


def consistent_with_rank(relevances: list[float]) -> list[float]:
    """Each relevance capped at the lowest one ranked above it (so non-increasing)."""
    out: list[float] = []
    for value in relevances:
        out.append(min(value, out[-1]) if out else value)
    return out

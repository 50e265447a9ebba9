"""Keyword search text: what the FTS5 index holds and what a query asks it.

Why not pass user text through: FTS5 has its own query syntax (quotes, ``AND``,
``NEAR``, ``*``, ``^``, column filters, parentheses), so a user typing
``what's "new"?`` or ``C++ -flag`` would get a syntax error or a different query.
The query builder keeps only letters and digits (any script), quotes every term as
an FTS5 string and ORs them together, so any input yields either a valid query or
no query at all, and documents that match more (and rarer) terms rank higher under
bm25. Text in double quotes stays a phrase (its words must appear in that order).

Tokenizer: ``unicode61 remove_diacritics 2`` without a stemmer. Porter stemming
merged question words into stems found in half of all chunks ("why", "my", "using"
→ "us") and only knows English; exact words rank better on the search benchmark.

Chinese, Japanese and Korean are written without spaces between words, so
unicode61 would index a whole sentence as one token and a query word would never
match it. CJK runs are therefore segmented into overlapping character bigrams, both
in the indexed text (:func:`index_text`) and in the query: 乌龙茶 is indexed as
``乌龙 龙茶`` and the query 乌龙茶 asks for both bigrams (a quoted one as a phrase).

Without a stemmer "zebra" does not find "zebras" by keyword (the vector side still
relates them). Asking for each word's singular / plural forms as extra OR terms was
measured and dropped: a chunk holding both forms is counted twice, which cost 0.07
MRR@10 on the benchmark's bm25 side (`variants` is kept for relevance display).

Query terms that carry no meaning on their own are dropped: single letters or
digits (outside CJK) and English function words (Lucene's default English stop
set) — unless that would leave nothing, then the query is kept as typed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

FTS_TOKENIZER = "unicode61 remove_diacritics 2"
MAX_TERMS = 48
MAX_TERM_CHARS = 64

# Letters and digits of any script (Python's \w minus the underscore, which
# unicode61 treats as a separator anyway).
_WORD = re.compile(r"[^\W_]+")
# Han (incl. extension A and compatibility), kana, Hangul syllables and jamo.
_CJK_CLASS = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_HAS_CJK = re.compile(f"[{_CJK_CLASS}]")
_PHRASE = re.compile(r'"([^"]*)"')

# Lucene's default English stop set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)


def starts_cjk(text: str) -> bool:
    """True when ``text`` begins with a Chinese, Japanese or Korean character."""
    return _HAS_CJK.match(text) is not None


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str | None:
    """The text FTS5 should index for ``text``: CJK runs as bigrams; None when no change is needed."""
    if not _HAS_CJK.search(text):
        return None
    return _CJK_RUN.sub(lambda m: " " + " ".join(_bigrams(m.group(0))) + " ", text)


def _tokens(text: str) -> Iterator[tuple[str, bool]]:
    """(token, is_cjk) for each word of ``text``; CJK runs give their bigrams."""
    for match in _WORD.finditer(text):
        word = match.group(0)
        pos = 0
        for run in _CJK_RUN.finditer(word):
            if run.start() > pos:
                yield word[pos : run.start()].lower()[:MAX_TERM_CHARS], False
            for gram in _bigrams(run.group(0)):
                yield gram, True
            pos = run.end()
        if pos < len(word):
            yield word[pos:].lower()[:MAX_TERM_CHARS], False


def word_tokens(text: str) -> list[str]:
    """The lower-cased words of already segmented text, as the index sees them (roughly:
    unicode61 also folds diacritics, which only matters for relevance display)."""
    return [m.group(0).lower() for m in _WORD.finditer(text)]


def has_terms(text: str) -> bool:
    """True when ``text`` contains anything FTS5 indexes (a letter or digit)."""
    return _WORD.search(text) is not None


def query_terms(query: str) -> list[tuple[str, ...]]:
    """The query's terms in order of first appearance: a 1-tuple per word, a longer
    tuple per quoted phrase (or CJK word in quotes); duplicates removed, capped."""
    if not isinstance(query, str):
        raise TypeError(f"query must be str, got {type(query).__name__}")
    # Lone surrogates cannot be encoded to UTF-8 for SQLite: drop them.
    clean = query.encode("utf-8", "ignore").decode("utf-8")
    kept: dict[tuple[str, ...], None] = {}
    everything: dict[tuple[str, ...], None] = {}
    pos = 0
    pieces: list[tuple[str, bool]] = []  # (text, quoted)
    for m in _PHRASE.finditer(clean):
        pieces.append((clean[pos : m.start()], False))
        pieces.append((m.group(1), True))
        pos = m.end()
    pieces.append((clean[pos:], False))
    for text, quoted in pieces:
        tokens = list(_tokens(text))
        if quoted and len(tokens) > 1:
            phrase = tuple(t for t, _ in tokens)[:MAX_TERMS]
            everything[phrase] = None
            kept[phrase] = None
            continue
        for token, cjk in tokens:
            term = (token,)
            everything[term] = None
            if cjk or quoted or (len(token) > 1 and token not in STOP_WORDS):
                kept[term] = None
    chosen = kept or everything
    return list(chosen)[:MAX_TERMS]


_LATIN_WORD = re.compile(r"[a-z]{3,}")


def variants(word: str) -> list[str]:
    """The word, then its likely singular / plural forms (Latin-script words of 3+ letters).

    Forms that are not words cost nothing: they match no document.
    """
    if not _LATIN_WORD.fullmatch(word):
        return [word]
    forms = [word]
    if word.endswith("ies") and len(word) > 4:
        forms.append(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        forms.append(word[:-1])
        if len(word) > 4 and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
            forms.append(word[:-2])
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        forms.append(word[:-1])
    if word.endswith(("s", "x", "z", "ch", "sh")):
        if word.endswith(("ss", "us", "x", "z", "ch", "sh")):
            forms.append(word + "es")
    elif word.endswith("y") and word[-2:-1] not in "aeiou":
        forms.append(word[:-1] + "ies")
    else:
        forms.append(word + "s")
    return list(dict.fromkeys(forms))


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def fts_match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression for ``query``, or None when it has no terms.

    Every word is a double-quoted FTS5 string, a phrase is its quoted words joined
    by spaces inside one string; terms are OR-ed. A lone CJK character is a prefix query, so it also finds the bigrams
    it starts.
    """
    terms = query_terms(query)
    if not terms:
        return None
    parts: dict[str, None] = {}
    for term in terms:
        if len(term) == 1 and len(term[0]) == 1 and _HAS_CJK.match(term[0]):
            parts[_quote(term[0]) + "*"] = None
        else:
            parts[_quote(" ".join(term))] = None
    return " OR ".join(parts)

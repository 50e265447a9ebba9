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

Start-up: a character class spanning the CJK blocks costs ~5 ms to compile (the
regular-expression compiler enumerates its ~45,000 code points), more than a whole
search of a small base. Whether a text holds CJK is therefore answered from its set
of distinct characters (:func:`_has_cjk`) until a process has checked many texts,
and the CJK-run expression is compiled on first use: by a text that has CJK in it,
or by an indexing process that has checked enough texts for the scan to pay.
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
_CJK_RANGES = (
    (0x1100, 0x11FF), (0x3040, 0x30FF), (0x3130, 0x318F), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F),
)
_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES)
_FIRST_CJK = chr(_CJK_RANGES[0][0])
_cjk_run_re: re.Pattern[str] | None = None
_CHECKS_BEFORE_COMPILING = 64  # a search checks its query and ~10-20 result texts
_set_checks = 0
_PHRASE = re.compile(r'"([^"]*)"')

# Lucene's default English stop set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def _has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character. ASCII cannot; for the first non-ASCII
    texts of a process its distinct characters at or above the first CJK block are
    tested one by one (no expression to compile); once the CJK expression exists, or
    after `_CHECKS_BEFORE_COMPILING` such texts (indexing: the regular expression scans
    ~2x faster than building the set), the expression answers."""
    global _set_checks
    if text.isascii():
        return False
    if _cjk_run_re is None and _set_checks < _CHECKS_BEFORE_COMPILING:
        _set_checks += 1
        return any(c >= _FIRST_CJK and _is_cjk(c) for c in set(text))
    return _cjk_run().search(text) is not None


def _cjk_run() -> re.Pattern[str]:
    """A run of CJK characters, compiled on first use (see the module docstring)."""
    global _cjk_run_re
    if _cjk_run_re is None:
        _cjk_run_re = re.compile(f"[{_CJK_CLASS}]+")
    return _cjk_run_re


def starts_cjk(text: str) -> bool:
    """True when ``text`` begins with a Chinese, Japanese or Korean character."""
    return bool(text) and _is_cjk(text[0])


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str | None:
    """The text FTS5 should index for ``text``: CJK runs as bigrams; None when no change is needed."""
    if not _has_cjk(text):
        return None
    return _cjk_run().sub(lambda m: " " + " ".join(_bigrams(m.group(0))) + " ", text)


def _tokens(text: str) -> Iterator[tuple[str, bool]]:
    """(token, is_cjk) for each word of ``text``; CJK runs give their bigrams."""
    for match in _WORD.finditer(text):
        word = match.group(0)
        if not _has_cjk(word):
            yield word.lower()[:MAX_TERM_CHARS], False
            continue
        pos = 0
        for run in _cjk_run().finditer(word):
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
        if len(term) == 1 and len(term[0]) == 1 and starts_cjk(term[0]):
            parts[_quote(term[0]) + "*"] = None
        else:
            parts[_quote(" ".join(term))] = None
    return " OR ".join(parts)

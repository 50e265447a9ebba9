"""Full text for PostgreSQL: the ``tsvector`` a chunk is indexed as and the ``tsquery`` a search asks.

Both are built here, in Python, from the same tokens the SQLite store's FTS5 index sees
(:mod:`core.search.keyword`): words of letters and digits, lower-cased, Latin
diacritics removed (FTS5's ``remove_diacritics 2``), CJK runs as overlapping
bigrams, no stemmer, no stop words in the index. PostgreSQL's own parsers
(``to_tsvector``) would split differently (``3.14``, ``foo-bar``, e-mail addresses are
one token there) and fold nothing outside their dictionaries, so the same query would
find different chunks on the two backends. The literals are cast (``::tsvector``,
``::tsquery``), which keeps lexemes exactly as written.

pg_trgm is not used: the pgvector build the tests run on (pgserver's PostgreSQL 16)
ships without it, and the bigram tokens already give CJK the same matches as on SQLite.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from ktui.core.search.keyword import MAX_TERM_CHARS, index_text, query_terms, starts_cjk, word_tokens

MAX_POSITION = 16383  # PostgreSQL's largest tsvector position (larger ones collapse onto it)
MAX_POSITIONS = 256  # positions PostgreSQL keeps per lexeme


def fold(token: str) -> str:
    """Latin, Greek and Cyrillic letters without their diacritics (é → e), as FTS5 folds them.

    Only those scripts: decomposing kana would strip the voicing marks that tell
    が from か, which FTS5 keeps.
    """
    if token.isascii():
        return token
    out = []
    for ch in token:
        if ord(ch) < 0x0530 or 0x1E00 <= ord(ch) <= 0x1EFF:
            out.append("".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c)))
        else:
            out.append(ch)
    return "".join(out)


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(text: str) -> str:
    """The ``tsvector`` text of one chunk: each lexeme with its positions (1-based)."""
    return indexed(text)[0]


def indexed(text: str) -> tuple[str, int]:
    """The ``tsvector`` text of one chunk and its length in tokens (bm25's document length).

    Tokens longer than ``MAX_TERM_CHARS`` are left out: a query term is cut to that
    length, so on SQLite too no query can ever match them.
    """
    positions: dict[str, list[int]] = {}
    tokens = word_tokens(index_text(text) or text)
    for n, token in enumerate(tokens, start=1):
        lexeme = fold(token)
        if not lexeme or len(lexeme) > MAX_TERM_CHARS:
            continue
        seen = positions.setdefault(lexeme, [])
        if len(seen) < MAX_POSITIONS:
            seen.append(min(n, MAX_POSITION))
    literal = " ".join(f"{_quote(lex)}:{','.join(map(str, sorted(set(pos))))}" for lex, pos in positions.items())
    return literal, len(tokens)


@dataclass(frozen=True, slots=True)
class Term:
    """One query term for bm25: a lexeme (``prefix``: any lexeme it starts) or a phrase."""

    tsquery: str  # the term alone, as a tsquery
    lexeme: str | None  # None for a phrase
    prefix: bool = False
    words: tuple[str, ...] = ()  # a phrase's words, in order


def query_plan(query: str) -> list[Term]:
    """The query's terms (see :func:`tsquery_literal`), each on its own."""
    terms: dict[str, Term] = {}
    for term in query_terms(query):
        words = [w for w in (fold(w) for w in term) if w]
        if not words:
            continue
        if len(words) == 1 and len(words[0]) == 1 and starts_cjk(words[0]):
            terms.setdefault(words[0] + "*", Term(_quote(words[0]) + ":*", words[0], prefix=True))
        elif len(words) == 1:
            terms.setdefault(words[0], Term(_quote(words[0]), words[0]))
        else:
            text = "(" + " <-> ".join(_quote(w) for w in words) + ")"
            terms.setdefault(text, Term(text, None, words=tuple(words)))
    return list(terms.values())


def tsquery_literal(query: str) -> str | None:
    """A ``tsquery`` for ``query`` (terms OR-ed, a phrase as ``<->``), or None when it has no terms.

    The same terms as the FTS5 expression (:func:`core.search.keyword.fts_match_expression`):
    a lone CJK character is a prefix query (``'字':*``), so it also finds the bigrams it starts.
    """
    plan = query_plan(query)
    return " | ".join(t.tsquery for t in plan) if plan else None

"""Turning arbitrary user text into a safe FTS5 MATCH expression.

Why not pass the text through: FTS5 has its own query syntax (quotes, ``AND``,
``NEAR``, ``*``, ``^``, column filters, parentheses), so a user typing
``what's "new"?`` or ``C++ -flag`` would get a syntax error or a different
query. We keep only word characters, quote every term as an FTS5 string (which
FTS5 then tokenises with the table's own tokenizer) and OR them together, so
any input yields either a valid query or no query at all, and documents that
match more (and rarer) terms rank higher under bm25.
"""

from __future__ import annotations

import re

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
MAX_TERMS = 32
MAX_TERM_CHARS = 64

# Letters and digits of any script (Python's \w minus the underscore, which
# unicode61 treats as a separator anyway).
_TERM = re.compile(r"[^\W_]+")


def fts_match_expression(query: str) -> str | None:
    """Return an FTS5 MATCH expression for ``query``, or None when it has no terms.

    Every term becomes a double-quoted FTS5 string (quotes cannot occur inside a
    term, but are doubled defensively); at most ``MAX_TERMS`` distinct terms
    are kept, in order of first appearance.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be str, got {type(query).__name__}")
    # Lone surrogates cannot be encoded to UTF-8 for SQLite: drop them.
    clean = query.encode("utf-8", "ignore").decode("utf-8")
    seen: dict[str, None] = {}
    for match in _TERM.finditer(clean):
        term = match.group(0)[:MAX_TERM_CHARS].lower()
        if term not in seen:
            seen[term] = None
            if len(seen) >= MAX_TERMS:
                break
    if not seen:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in seen)

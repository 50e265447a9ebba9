"""FTS5 query building: any text becomes a safe expression (or none)."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from ktui.core.search import fts_match_expression
from ktui.core.search.keyword import FTS_TOKENIZER, MAX_TERMS


def test_terms_are_quoted_lowercased_deduplicated_and_ored() -> None:
    assert (
        fts_match_expression('Hello "world" hello AND NEAR(x*)')
        == '"hello" OR "world" OR "and" OR "near" OR "x"'
    )


def test_text_without_letters_or_digits_has_no_query() -> None:
    for q in ["", "   ", '"""', "*^-+()", "___", "\x00\x01", "\ud800"]:
        assert fts_match_expression(q) is None


def test_non_latin_scripts_and_diacritics_are_kept() -> None:
    assert fts_match_expression("Grüße, 東京! ") == '"grüße" OR "東京"'


def test_term_count_is_capped() -> None:
    expr = fts_match_expression(" ".join(f"w{i}" for i in range(500)))
    assert expr is not None and expr.count(" OR ") == MAX_TERMS - 1


@given(st.text(alphabet=st.characters(codec=None), max_size=200))
def test_any_text_yields_an_expression_fts5_accepts(text: str) -> None:
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE VIRTUAL TABLE f USING fts5(t, tokenize='{FTS_TOKENIZER}')")
    con.execute("INSERT INTO f VALUES ('some words here')")
    expr = fts_match_expression(text)
    if expr is not None:
        con.execute(
            "SELECT rowid, rank FROM f WHERE f MATCH ? ORDER BY rank", (expr,)
        ).fetchall()

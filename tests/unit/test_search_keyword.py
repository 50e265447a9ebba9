"""FTS5 query building: any text becomes a safe expression (or none)."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from ktui.core.search import fts_match_expression
from ktui.core.search.keyword import FTS_TOKENIZER, MAX_TERMS, index_text, query_terms, variants


def test_terms_are_quoted_lowercased_deduplicated_and_ored() -> None:
    assert fts_match_expression('Hello world hello AND NEAR(xy*)') == '"hello" OR "world" OR "near" OR "xy"'


def test_quoted_text_stays_a_phrase_and_punctuation_is_ignored() -> None:
    assert fts_match_expression('"Quick, brown" fox!') == '"quick brown" OR "fox"'
    assert query_terms('say "to be or not to be"') == [("say",), ("to", "be", "or", "not", "to", "be")]
    assert query_terms('an "unclosed quote') == [("unclosed",), ("quote",)]


def test_stop_words_and_single_letters_are_dropped_unless_nothing_is_left() -> None:
    assert query_terms("what is the size of a page") == [("what",), ("size",), ("page",)]
    assert query_terms("C++ -x flag") == [("flag",)]
    assert query_terms("to be or not") == [("to",), ("be",), ("or",), ("not",)]
    assert fts_match_expression("x") == '"x"'


def test_plural_and_singular_forms_of_latin_words() -> None:
    assert variants("queries") == ["queries", "query", "querie"]
    assert variants("boxes")[-1] == "box" and variants("processes")[-1] == "process"
    assert variants("policy") == ["policy", "policies"] and variants("class") == ["class", "classes"]
    assert variants("stripes") == ["stripes", "stripe"] and variants("grüße") == ["grüße"]


def test_cjk_runs_become_bigrams_in_queries_and_in_indexed_text() -> None:
    assert fts_match_expression("乌龙茶") == '"乌龙" OR "龙茶"'
    assert fts_match_expression('"乌龙茶" 云南') == '"乌龙 龙茶" OR "云南"'
    assert fts_match_expression("茶") == '"茶"*'
    assert index_text("plain text") is None
    assert index_text("我喜欢乌龙茶, ok").split() == ["我喜", "喜欢", "欢乌", "乌龙", "龙茶", ",", "ok"]


def test_text_without_letters_or_digits_has_no_query() -> None:
    for q in ["", "   ", '"""', "*^-+()", "___", "\x00\x01", "\ud800"]:
        assert fts_match_expression(q) is None


def test_non_latin_scripts_and_diacritics_are_kept() -> None:
    assert fts_match_expression("Grüße, Москва, 東京! ") == '"grüße" OR "москва" OR "東京"'


def test_term_count_is_capped() -> None:
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)))) == MAX_TERMS


@given(st.text(alphabet=st.characters(codec=None), max_size=200))
def test_any_text_yields_an_expression_fts5_accepts(text: str) -> None:
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE VIRTUAL TABLE f USING fts5(t, tokenize='{FTS_TOKENIZER}')")
    con.execute("INSERT INTO f VALUES ('some words here')")
    con.execute("INSERT INTO f VALUES (?)", (index_text(text.encode("utf-8", "ignore").decode()) or "x",))
    expr = fts_match_expression(text)
    if expr is not None:
        con.execute(
            "SELECT rowid, rank FROM f WHERE f MATCH ? ORDER BY rank", (expr,)
        ).fetchall()

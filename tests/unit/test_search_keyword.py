"""FTS5 query building: any text becomes a safe expression (or none)."""

from __future__ import annotations

import re
import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from ktui.core.search import fts_match_expression, keyword
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


# The regular expressions the module used before it stopped compiling them at import
# (start-up): the set-of-characters test and the lazily compiled run must agree with them.
_OLD_CLASS = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
              "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f")
_OLD_HAS = re.compile(f"[{_OLD_CLASS}]")
_BOUNDARIES = "".join(chr(c) for lo, hi in keyword._CJK_RANGES for c in (lo - 1, lo, hi, hi + 1))
_MIXED = st.text(alphabet=st.sampled_from("ab Zé’—\"" + _BOUNDARIES + "乌龙茶かなカナ한국어ᄀ"), max_size=30)


@given(_MIXED)
def test_cjk_detection_without_the_compiled_class_agrees_with_it(text: str) -> None:
    expected = None if not _OLD_HAS.search(text) else re.sub(
        f"[{_OLD_CLASS}]+", lambda m: " " + " ".join(keyword._bigrams(m.group(0))) + " ", text)
    saved = keyword._cjk_run_re, keyword._set_checks
    try:
        for compiled in (False, True):  # the set-of-characters test, then the expression's
            keyword._cjk_run_re, keyword._set_checks = None, 0
            if compiled:
                keyword._cjk_run()
            assert keyword._has_cjk(text) == bool(_OLD_HAS.search(text))
            assert keyword.starts_cjk(text) == bool(_OLD_HAS.match(text))
            assert index_text(text) == expected
    finally:
        keyword._cjk_run_re, keyword._set_checks = saved


def test_the_cjk_expression_is_compiled_only_for_text_that_has_cjk() -> None:
    import subprocess
    import sys

    probe = ("from ktui.core.search import keyword as k\n"
             "k.query_terms('sea otters’ “hands” — naïve café'); k.index_text('Ελληνικά, кириллица ’')\n"
             "assert k._cjk_run_re is None\n"
             "assert k.query_terms('乌龙茶') == [('乌龙',), ('龙茶',)] and k._cjk_run_re is not None\n")
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)

"""User and document text is data: the one boundary (`ktui.tui.text`) and a check of the
TUI's source that no widget is handed text that Textual would parse as markup."""

from __future__ import annotations

import ast
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.content import Content

from ktui.tui.text import assemble, clean, literal, rich_literal

TUI = Path(__file__).resolve().parents[2] / "tui"

# Callables whose str argument Textual parses as markup. `notify` and `ConfirmScreen`
# are not here: both clean their text themselves (KtuiApp.notify, ConfirmScreen).
MARKUP_SINKS = {"Label", "Static", "Button", "update", "Option", "add_row", "set_label", "DiscoveryHit", "Hit",
                "TabPane", "show_status", "add_option"}


def _is_formatted(node: ast.AST) -> bool:
    """An f-string, a concatenation or .format()/.join() of strings: built from data, not a constant."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join"):
        return True
    return False


def _sink_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _tui_modules() -> list[Path]:
    return [p for p in TUI.rglob("*.py") if not p.name.startswith("cli")]


@pytest.mark.parametrize("path", _tui_modules(), ids=lambda p: str(p.relative_to(TUI)))
def test_no_widget_gets_a_formatted_string(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _sink_name(node) in MARKUP_SINKS:
            for arg in node.args[:1]:
                if _is_formatted(arg):
                    offenders.append(f"{path.name}:{node.lineno} {_sink_name(node)}(…)")
    assert not offenders, "text built from data must go through ktui.tui.text: " + ", ".join(offenders)


def test_markup_is_kept_as_characters():
    for text in ["[link=http://a]x", "[/]", "Docs [@click=app.quit]x", "Meeting notes [draft].md", "[b]bold[/b]",
                 "[", "]]]", "\\[escaped]"]:
        assert literal(text).plain == text
        assert rich_literal(text).plain == text
        assert Content.from_markup  # the API we avoid exists; our Content is not parsed
    joined = assemble("a [/] ", ("[link=x]b", "bold"), literal("[@click=app.quit]c"))
    assert joined.plain == "a [/] [link=x]b[@click=app.quit]c"


def test_escapes_and_controls_become_visible_pictures():
    assert clean("\x1b[31mred\x1b[0m") == "␛[31mred␛[0m"
    assert clean("a\tb") == "a    b"
    assert clean("bell\x07 nul\x00 del\x7f c1\x9b") == "bell␇ nul␀ del␡ c1�"
    assert clean("evil\u202eoverride\u2066iso") == "eviloverrideiso"
    assert clean("bad\udcffname") == "bad�name"
    assert clean("one\ntwo\r\nthree", one_line=True) == "one ⏎ two ⏎ three"
    assert clean("z" + "\u0301" * 50) == "z\u0301\u0301"  # zalgo is capped
    for kept in ["日本語のテキスト", "שלום עולם", "مرحبا", "👩‍👩‍👧 emoji 🎉", "e\u0301", "x" * 10_000]:
        assert clean(kept) == kept


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_clean_output_is_safe_to_draw(text: str):
    out = clean(text)
    one = clean(text, one_line=True)
    assert "\n" not in one and "\r" not in one
    for ch in out:
        code = ord(ch)
        assert ch == "\n" or not (code < 0x20 or 0x7F <= code < 0xA0), repr(ch)
        assert not 0xD800 <= code <= 0xDFFF
        assert code not in (0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069)
    assert literal(text).plain == out
    assert clean(out) == out  # idempotent


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Cf", "Mn", "Me", "Zl", "Zp")),
               max_size=200))
def test_printable_text_is_unchanged(text: str):
    assert clean(text) == text
    assert not any(unicodedata.category(c) == "Cc" for c in clean(text))

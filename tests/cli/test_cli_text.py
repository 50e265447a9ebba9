"""Terminal safety: user and document text never reaches a terminal as control characters.

Unit properties of `printable`, then the real CLI as a subprocess: a file whose name
holds a newline and an escape sequence, and a note that would retitle and clear the
terminal, go through `add --wait`, `items`, `search` and `chunks`; the human-readable
output shows visible escapes, the JSON output keeps the exact text.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.tui.cli_text import printable
from tests.cli.test_cli import Ktui
from tests.support.embedding_server import embedding_server_fixture

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

server = embedding_server_fixture(32, scope="module")


def test_printable_escapes_what_a_terminal_acts_on():
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("one\ntwo\rthree\tfour") == "one\\ntwo\\rthree\\tfour"
    assert printable("\x1b]0;title\x07") == "\\x1b]0;title\\x07"
    assert printable("csi\x9b31m") == "csi\\x9b31m"
    assert printable("abc\u202eevil") == "abc\\u202eevil"
    assert printable("line\u2028sep") == "line\\u2028sep"
    assert printable("lone \udc80 surrogate") == "lone \\udc80 surrogate"
    assert printable("\x00\x7f") == "\\x00\\x7f"


def test_printable_keeps_ordinary_text():
    for text in ("plain", "Grüße, 日本語, emoji 📁", "C:\\Users\\me", "", "100% [x] {y}"):
        assert printable(text) == text


@given(st.text())
def test_printable_output_has_no_terminal_active_character(text):
    shown = printable(text)
    assert UNSAFE.search(shown) is None
    shown.encode("utf-8")  # always writable
    if UNSAFE.search(text) is None:
        assert shown == text


@pytest.fixture
def ktui(tmp_path, server):
    return Ktui(tmp_path, server.url)


def _clean(output: str) -> None:
    assert "\x1b" not in output and "\x07" not in output and "\x9b" not in output, repr(output)


@pytest.mark.slow
def test_hostile_names_and_text_are_escaped_in_human_output(ktui):
    name = "evil\ndone: 99 completed, 0 failed\x1b[2J.md"
    (ktui.work / name).write_text("Otters hold hands while they sleep.", encoding="utf-8")
    note = "\x1b]0;pwned\x07Hummingbirds hover\x1b[2J by beating their wings"
    ktui("base", "create", "Safe")

    added = ktui("add", "Safe", name, "--note", note, "--wait")
    for output in (added.stdout, added.stderr):
        _clean(output)
    assert "evil\\ndone: 99 completed, 0 failed\\x1b[2J.md" in added.stdout
    assert "\\x1b]0;pwned\\x07Hummingbirds" in added.stdout
    # the forged progress line is not a line of its own
    assert not any(line.startswith("done: 99") for line in (added.stdout + added.stderr).splitlines())
    assert "done: 2 completed, 0 failed" in added.stderr

    items = ktui("items", "Safe")
    _clean(items.stdout + items.stderr)
    assert "evil\\ndone" in items.stdout and len(items.stdout.strip().splitlines()) == 3  # header + 2 rows

    found = ktui("search", "Safe", "hummingbirds hover wings")
    _clean(found.stdout + found.stderr)
    assert "\\x1b]0;pwned\\x07Hummingbirds hover\\x1b[2J" in found.stdout

    missing = ktui("items", "no\x1b[2Jsuch", rc=1)
    _clean(missing.stderr)
    assert "no\\x1b[2Jsuch" in missing.stderr

    # JSON keeps the exact text
    listing = ktui.json("items", "Safe")
    assert {i["name"] for i in listing["items"]} >= {name}
    hits = json.loads(ktui("search", "Safe", "hummingbirds hover wings", "--json").stdout)
    assert any(r["text"].startswith(note[:20]) for r in hits["results"])


@pytest.mark.skipif(os.name != "posix", reason="POSIX file names are bytes")
def test_a_file_whose_name_is_not_utf8_indexes_in_a_folder_and_is_found(ktui):
    """os.fsdecode turns the byte 0xff of a name into a lone surrogate; the chunk's metadata
    (its source) must still be storable, and every output must still be writable."""
    folder = ktui.work / "mixed"
    folder.mkdir()
    (folder / "good.md").write_text("# Kites\nKites fly in spring.\n", encoding="utf-8")
    os.makedirs(os.fsencode(folder), exist_ok=True)
    with open(os.path.join(os.fsencode(folder), b"bad-\xff name.md"), "wb") as handle:
        handle.write(b"# Otters\nOtters hold hands while they sleep.\n")
    ktui("base", "create", "Bytes")
    added = ktui("add", "Bytes", str(folder), "--wait")  # rc 0: nothing failed
    assert "done: 3 completed, 0 failed" in added.stderr, added.stderr
    found = ktui("search", "Bytes", "otters hold hands", "--mode", "bm25")
    assert "bad-\\udcff name.md" in found.stdout.splitlines()[0], found.stdout
    hits = ktui.json("search", "Bytes", "otters hold hands")["results"]
    assert hits[0]["text"].startswith("# Otters") and hits[0]["source"].endswith(" name.md")
    listed = ktui.json("items", "Bytes", "--all")["items"]
    assert {i["status"] for i in listed} == {"completed"}
    bad = next(i for i in listed if i["name"].startswith("bad-"))
    chunks = ktui("chunks", "Bytes", bad["id"])
    assert "Otters hold hands" in chunks.stdout


# --- tables line up by display width, not by character count -----------------

WIDE_NAMES = ["plain.md", "日本語.md", "🍎 notes.md", "📁 Notes", "Cafe\u0301 re\u0301sume\u0301.md", "x\u200dy", "e\u0301\u0301", "\U0001f469\u200d\U0001f4bb dev.md"]


def _column_starts(line: str, cells: list[str]) -> list[int]:
    """The display column at which each of `cells` starts in `line` (cells found in order)."""
    from rich.cells import cell_len

    starts, at = [], 0
    for cell in cells:
        at = line.index(cell, at)
        starts.append(cell_len(line[:at]))
        at += len(cell)
    return starts


def test_table_columns_start_at_the_same_display_column():
    import io

    from ktui.tui.cli_render import table

    rows = [[f"id{i}", name, f"ready {i}", str(i)] for i, name in enumerate(WIDE_NAMES)]
    out = io.StringIO()
    table(rows, ["ID", "NAME", "STATUS", "ITEMS"], out)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(rows) + 1
    starts = {tuple(_column_starts(line, cells)) for line, cells in zip(lines, [["ID", "NAME", "STATUS", "ITEMS"], *rows], strict=True)}
    assert len(starts) == 1, lines
    for line, row in zip(lines[1:], rows, strict=True):
        assert row[1] in line  # names are printed literally


def test_cell_width_agrees_with_rich():
    from rich.cells import cell_len

    from ktui.tui.cli_text import cell_width

    for text in [*WIDE_NAMES, "", "ascii only", "한국어", "ｆｕｌｌ", "\u0301start"]:
        assert cell_width(text) == cell_len(text), text

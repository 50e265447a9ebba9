"""Fast in-process checks of the CLI's pieces: argument parsing, source detection, tree order, progress."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.errors import ValidationError
from ktui.core.models import ItemStatus, ItemType, KnowledgeItem, NoteItemData
from ktui.tui.cli import COMMANDS, build_parser, command_word
from ktui.tui.cli_items import _inputs, _tree_order
from ktui.tui.cli_render import UsageError


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_common_options_work_before_and_after_the_command():
    a = parse("--json", "--data-dir", "/d", "base", "list")
    b = parse("base", "list", "--json", "--data-dir", "/d")
    assert (a.json, a.data_dir) == (b.json, b.data_dir) == (True, "/d")
    assert parse("base", "list").json is False


ARGVS = [
    ["search", "Notes", "sea otters", "--top-k", "3", "--json"], ["--json", "--data-dir", "/d", "base", "list"],
    ["--data-dir=/d", "items", "Notes", "--all"], ["--conf", "c.toml", "rm", "Notes", "a", "b"],
    ["base", "update", "B", "--threshold", "none"], ["groups", "rename", "G", "H"], ["add", "B", "x.md", "--wait"],
    ["--debug", "reindex", "B", "--all"], ["serve", "--port", "0"], ["rank", "q", "--min-score", "0.3"],
    ["watch"], ["wait", "B"], ["doctor", "--repair"], ["models"], ["mcp", "--allow-writes"], ["item", "B", "i"],
    ["chunks", "B", "i"], ["migrate", "--to", "postgresql://h/db", "--merge", "--batch", "10"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda a: " ".join(a))
def test_a_command_parses_the_same_with_only_its_own_parser_built(argv):
    """`main` builds the top level and the one command argv names (start-up time)."""
    word = command_word(argv)
    assert word in COMMANDS
    one, full = vars(build_parser(word).parse_args(argv)), vars(build_parser().parse_args(argv))
    # each names the parser of its command for its usage errors: the same command, not the same object
    assert one.pop("usage_parser").prog == full.pop("usage_parser").prog
    assert one == full


def test_each_commands_help_and_the_usage_are_those_of_the_whole_parser():
    full = build_parser()
    choices = next(a for a in full._actions if a.dest == "command").choices
    assert sorted(choices) == sorted(COMMANDS)  # COMMANDS lists every command
    for name in COMMANDS:
        one = build_parser(name)
        assert one.format_usage() == full.format_usage()
        assert next(a for a in one._actions if a.dest == "command").choices[name].format_help() == \
            choices[name].format_help(), name


@pytest.mark.parametrize(("argv", "word"), [
    (["search", "B", "q"], "search"), (["--data-dir", "search", "items", "B"], "items"),
    (["--st=x", "rm", "B", "i"], "rm"), (["search", "-h"], "search"),
    # the whole parser: the TUI, the top-level help, a typo (argparse lists the choices), ambiguity
    ([], None), (["--json"], None), (["-h", "search"], None), (["--hel", "add"], None), (["serach", "B"], None),
    (["--", "search"], None), (["--d", "search", "B", "q"], None),
])
def test_command_word_skips_the_options_before_the_command(argv, word):
    assert command_word(argv) == word


def test_update_sends_only_given_options_and_none_clears():
    args = parse("base", "update", "B", "--threshold", "none", "--top-k", "4")
    assert args.threshold is None and args.top_k == 4
    assert not hasattr(args, "emoji") and not hasattr(args, "alpha")
    with pytest.raises(SystemExit):
        parse("base", "update", "B", "--threshold", "high")


def test_sources_are_detected(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "f.txt").write_text("x", encoding="utf-8")
    inputs = _inputs(parse("add", "B", "d", "f.txt", "https://e.org/x", "--note", "hi", "--watch"))
    assert [(i.type, i.data) for i in inputs] == [
        ("directory", {"path": "d", "watch": True}),
        ("file", {"path": "f.txt"}),
        ("url", {"url": "https://e.org/x"}),
        ("note", {"content": "hi"}),
    ]
    assert _inputs(parse("add", "B", "http://e.org/s.xml", "--sitemap"))[0].type == "sitemap"
    with pytest.raises(ValidationError, match="does not exist: nope"):
        _inputs(parse("add", "B", "nope"))
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(ValidationError, match=r"^path: is a symbolic link loop \(it leads back to itself\): loop$"):
        _inputs(parse("add", "B", "loop"))
    (tmp_path / "dangling.md").symlink_to("/no/such/target.md")
    with pytest.raises(ValidationError, match=r"is a broken symbolic link \(its target /no/such/target.md does not exist\): dangling.md$"):
        _inputs(parse("add", "B", "dangling.md"))
    with pytest.raises(ValidationError, match="is not a directory"):
        _inputs(parse("add", "B", "f.txt", "--dir"))
    for argv, message in [
        (("add", "B"), "nothing to add"),
        (("add", "B", "f.txt", "--watch"), "--watch applies to directories only"),
        (("add", "B", "f.txt", "--source-url", "https://e.org"), "--source-url applies to --note only"),
        (("add", "B", "https://e.org", "--dir"), "--dir expects directories"),
    ]:
        with pytest.raises(UsageError, match=message):
            _inputs(parse(*argv))


def _item(ident: str, parent: str | None, created: str) -> KnowledgeItem:
    return KnowledgeItem(ident, "b", parent, ItemType.NOTE, NoteItemData(ident, "note"), ItemStatus.COMPLETED,
                         None, None, created, created)


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(-1, 9)), max_size=12, unique_by=lambda t: t[0]))
def test_tree_order_puts_parents_first_and_loses_nothing(pairs):
    ids = {f"i{n}" for n, _ in pairs}
    items = [_item(f"i{n}", f"i{p}" if p >= 0 and f"i{p}" in ids and p != n else None, f"t{n}") for n, p in pairs]
    # break cycles: keep a parent link only towards a smaller number
    items = [_item(i.id, i.group_id if i.group_id and int(i.group_id[1:]) < int(i.id[1:]) else None, i.created_at)
             for i in items]
    ordered, depth = _tree_order(items)
    assert sorted(i.id for i in ordered) == sorted(i.id for i in items)
    position = {i.id: n for n, i in enumerate(ordered)}
    for item in items:
        if item.group_id:
            assert position[item.group_id] < position[item.id]
            assert depth[item.id] == depth[item.group_id] + 1


def test_tree_order_keeps_orphans_of_a_filter():
    ordered, depth = _tree_order([_item("child", "missing-parent", "t1"), _item("root", None, "t0")])
    assert [i.id for i in ordered] == ["root", "child"] and depth == {"root": 0, "child": 0}


def test_docs_name_every_command():
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if getattr(a, "choices", None) and a.dest.endswith("_command")]
        names = [f"{name} {n}" for n in nested[0].choices] if nested else [name]
        for full in names:
            assert f"ktui {full}" in text, full


def test_doctor_names_a_few_findings_of_each_kind_and_counts_the_rest():
    from ktui.core.doctor import DoctorFinding
    from ktui.tui.cli_service import SHOWN_ALIKE, finding_lines

    stuck = [DoctorFinding(f"item i{k} (/notes/n{k}.md)", "processing, but nothing is working on it",
                           "repair would: queued it again") for k in range(1904)]
    damaged = DoctorFinding("bases/b.sqlite", "the store cannot be opened", "repair would: rebuild base B")
    lines = list(finding_lines([*stuck[:2], damaged, *stuck[2:]]))
    assert lines == [
        "problem  item i0 (/notes/n0.md): processing, but nothing is working on it",
        "    repair would: queued it again",
        "problem  item i1 (/notes/n1.md): processing, but nothing is working on it",
        "    repair would: queued it again",
        "problem  bases/b.sqlite: the store cannot be opened",
        "    repair would: rebuild base B",
        "problem  item i2 (/notes/n2.md): processing, but nothing is working on it",
        "    repair would: queued it again",
        f"problem  … and {1904 - SHOWN_ALIKE:,} more like the above (processing, but nothing is working on it; "
        "`ktui doctor --json` lists every one)",
    ]
    # a handful is listed in full; after the repairs, without the actions
    assert len(list(finding_lines(stuck[:SHOWN_ALIKE]))) == 2 * SHOWN_ALIKE
    assert list(finding_lines([damaged], actions=False)) == ["problem  bases/b.sqlite: the store cannot be opened"]

"""Hostile input against the data layer (issue 2, "Bad input").

Thousands of malformed item payloads, base configurations, patches, ids, pages and
names are thrown at the services. For every call:

* the only exceptions that may escape are `ValidationError` (naming a field) and,
  for a well-formed id that does not exist, `NotFoundError`;
* a rejected call leaves the database exactly as it was (no half-written rows, no
  open transaction);
* an accepted call leaves rows that obey the data model.

Example counts are fixed per test (see EXAMPLES) so the file tries ~6,000 inputs
in well under 30 s.
"""

from __future__ import annotations

import asyncio
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.core.data.base_validation import BASE_IMMUTABLE, BASE_PATCHABLE, BASE_READONLY
from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_validation import validate_item_inputs
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import MAX_INPUTS_PER_CALL, require_id
from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import (
    ANY_GROUP,
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    NoteItemData,
    SearchMode,
)
from tests.support.catalogues import BACKENDS, open_catalogue

pytestmark = pytest.mark.slow  # 2-10 s per test: thousands of inputs each (still runs in CI)

EXAMPLES = {
    "items": 1200,
    "patches": 900,
    "creates": 600,
    "ids": 1000,
    "pages": 500,
    "collapse": 400,
    "groups": 400,
}
"""max_examples per test: 5,000 inputs in total."""

# --- hostile values ------------------------------------------------------------------

HUGE = ["x" * 1_000_001, "🚀" * 300_000, "a" * 9000, "\x00" * 5000, " " * 100_000]
SPECIAL_FLOATS = [math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 0.5, 1.0000001, -1e-9]

surrogates = st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=3)
controls = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=31) | st.just("\x7f"), min_size=1, max_size=5)
weird_unicode = st.sampled_from(
    ["\u202e", "\ufeff", "\u200b", "\u0301" * 50, "👩‍👩‍👧", "🇫🇷", "Z̷̧̛̛a̸l̶g̷o̵", "\U0010ffff", "ﷺ", "\u2028", "𝔘"]
)
hostile_text = st.one_of(
    st.text(max_size=40),
    st.builds(lambda a, b, c: a + b + c, st.text(max_size=5), surrogates | controls | weird_unicode, st.text(max_size=5)),
    st.sampled_from(HUGE),
    st.text(alphabet=" \t\n\r\x0b\x0c", max_size=4),
    st.text(max_size=8).map(lambda s: f"  {s}  "),
)
scalar_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([10**400, -(10**400), 2**63, -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(SPECIAL_FLOATS),
    st.binary(max_size=10),
    hostile_text,
    st.just(ANY_GROUP),
    st.just(object()),
    st.sampled_from([SearchMode.BM25, ItemType.NOTE, ItemStatus.FAILED, Path("/tmp"), b"\xff", bytearray(b"x")]),
)
junk = st.recursive(
    scalar_junk,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), st.none()), inner, max_size=3),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=6,
)


# --- a small world per test -------------------------------------------------------------


@dataclass
class World:
    db: Any  # a catalogue of either backend (tests/support/catalogues.py)
    bases: BaseWrites
    items: ItemWrites
    base: KnowledgeBase
    other_base: KnowledgeBase
    group_id: str
    item_ids: list[str]
    foreign_item_id: str
    real_file: str
    real_dir: str


@pytest.fixture
def runner():
    with asyncio.Runner() as r:
        yield r


@pytest.fixture(params=BACKENDS)
def world(request, runner, tmp_path) -> World:
    real_dir = tmp_path / "docs"
    real_dir.mkdir()
    real_file = real_dir / "a.md"
    real_file.write_text("# a\n")

    async def setup() -> World:
        db = await open_catalogue(request.param, request, tmp_path)
        bases, items = BaseWrites(db), ItemWrites(db)
        group = await bases.create_group("G")
        base = await bases.create(name="B", embedding_model_id="builtin::wordllama", dimensions=8,
                                  config={"group_id": group.id})
        other = await bases.create(name="Other", embedding_model_id="builtin::wordllama", dimensions=8)
        root, note = await items.create_roots(
            base.id,
            [
                validate_item_inputs([ItemInput("directory", {"path": str(real_dir)})])[0],
                validate_item_inputs([ItemInput("note", {"content": "hello"})])[0],
            ],
        )
        kids = await items.create_children(
            base.id, root.id,
            [ChildSpec(ItemType.FILE, FileItemData(str(real_file), str(real_file))),
             ChildSpec(ItemType.DIRECTORY, DirectoryItemData("/x/sub", "/x/sub"),
                       [ChildSpec(ItemType.FILE, FileItemData("/x/sub/b", "/x/sub/b"))])],
        )
        (foreign,) = await items.create_roots(other.id, validate_item_inputs([ItemInput("note", {"content": "x"})]))
        return World(db, bases, items, base, other, group.id, [root.id, note.id, *(k.id for k in kids)],
                     foreign.id, str(real_file), str(real_dir))

    w = runner.run(setup())
    yield w
    runner.run(w.db.close())


SNAPSHOT = (
    "SELECT id, name, created_at, updated_at FROM knowledge_group ORDER BY id",
    "SELECT id, name, group_id, emoji, dimensions, embedding_model_id, status, error, rerank_model_id, chunk_size, "
    "chunk_overlap, threshold, document_count, search_mode, hybrid_alpha, created_at, updated_at, ocr_enabled, "
    "ocr_languages, ocr_max_pages FROM knowledge_base ORDER BY id",
    "SELECT id, base_id, group_id, type, data, status, phase, error, created_at, updated_at FROM knowledge_item "
    "ORDER BY id",
)


async def snapshot(db: Any) -> list[tuple]:
    """Every row of every table (the same SQL on both backends)."""
    return [tuple(r) for query in SNAPSHOT for r in await db.fetchall(query)]


def well_formed_id(value: Any) -> bool:
    try:
        require_id(value, "id")
    except ValidationError:
        return False
    return True


async def attempt(w: World, call, *, not_found_ok: bool = False) -> Any:
    """Run one service call; only the permitted errors may escape, and a refusal must
    leave the database untouched."""
    before = await snapshot(w.db)
    try:
        return await call()
    except ValidationError as exc:
        assert exc.errors and all(isinstance(k, str) and k for k in exc.errors), exc.errors
        assert all(isinstance(v, str) and v for v in exc.errors.values())
        str(exc)  # printable as-is
    except NotFoundError:
        if not not_found_ok:
            raise
    assert not w.db.in_transaction
    assert await snapshot(w.db) == before
    return None


# --- item payloads --------------------------------------------------------------------------

schemes = st.sampled_from(["http", "https", "HTTP", "ftp", "file", "javascript", "data", "", "htp", "ws"])
hosts = st.one_of(st.sampled_from(["example.com", "127.0.0.1", "[::1]", "[::1", "", "exa mple.com", "例え.jp",
                                   "a\x00b", "user:pw@h", "h:99999", "h:port", "%zz"]), st.text(max_size=10))
urls = st.one_of(
    st.builds(lambda s, h, p: f"{s}://{h}/{p}", schemes, hosts, st.text(max_size=10)),
    st.builds(lambda s, h: f"{s}:{h}", schemes, hosts),
    hostile_text,
    scalar_junk,
)


# "@FILE" / "@DIR" stand for a real file and directory of the test's tmp_path; they are
# substituted at run time so the strategies can be built once, at import.
path_values = st.one_of(
    st.sampled_from(["@FILE", "@DIR", "@FILE/", "@DIR/../docs", "@DIR/", "/definitely/not/here", "", " ", "~",
                     "~nobody_here/x", ".", "/dev/null", "/", "a\x00b", "x" * 5000, ("y" * 300) + "/z",
                     "@FILE\ud800", "\udcff", "@DIR/\x01"]),
    st.builds(lambda p, t: p + t, st.sampled_from(["@DIR/", "/tmp/", ""]), hostile_text),
    scalar_junk,
)
flags = st.one_of(st.booleans(), scalar_junk)
note_content = st.one_of(hostile_text, hostile_text, scalar_junk)
optional_url = st.one_of(st.none(), urls)
PAYLOADS = {
    "file": st.fixed_dictionaries({"path": path_values}),
    "directory": st.fixed_dictionaries({"path": path_values}, optional={"watch": flags}),
    "url": st.fixed_dictionaries({"url": urls}),
    "sitemap": st.fixed_dictionaries({"url": urls}),
    "note": st.fixed_dictionaries({"content": note_content}, optional={"source_url": optional_url}),
}
extra_keys = st.one_of(
    st.just({}), st.just({}), st.just({}),
    st.dictionaries(st.one_of(st.text(max_size=6), st.integers(), st.none()), scalar_junk, min_size=1, max_size=2),
)


def _make_input(kind: Any, data: Any, extra: dict, shape: int, drop: int) -> Any:
    if isinstance(data, dict):
        data = {**data, **extra}
        if drop == 1 and data:
            data.pop(next(iter(data)))
    if shape < 6:
        return ItemInput(kind, data)
    if shape < 9:
        return {"type": kind, "data": data}
    return {"type": kind, "data": data, "extra": shape}  # an unknown envelope key


kinds = {k: st.sampled_from([k, ItemType(k), f" {k}", k.upper()]) for k in PAYLOADS}
item_input = st.one_of(
    *(st.builds(_make_input, kinds[k], PAYLOADS[k], extra_keys, st.integers(0, 9), st.integers(0, 5)) for k in PAYLOADS),
    st.builds(_make_input, scalar_junk, st.one_of(*PAYLOADS.values()), extra_keys, st.integers(0, 9), st.integers(0, 5)),
    st.builds(_make_input, st.sampled_from(list(PAYLOADS)), junk, extra_keys, st.integers(0, 9), st.integers(0, 5)),
    junk,
)
item_lists = st.one_of(
    st.lists(item_input, min_size=0, max_size=4),
    st.lists(item_input, min_size=1, max_size=3).map(tuple),
    st.lists(item_input, min_size=1, max_size=4),
    item_input.map(lambda one: [one] * (MAX_INPUTS_PER_CALL + 1)),
    junk,
)


def resolve_paths(raw: Any, w: World) -> Any:
    """Replace the @FILE / @DIR placeholders with this test's real paths."""

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("@FILE", w.real_file).replace("@DIR", w.real_dir)
        return value

    def entry(e: Any) -> Any:
        if isinstance(e, ItemInput) and isinstance(e.data, dict):
            return ItemInput(e.type, {k: fix(v) if k == "path" else v for k, v in e.data.items()})
        if isinstance(e, dict) and isinstance(e.get("data"), dict):
            return {**e, "data": {k: fix(v) if k == "path" else v for k, v in e["data"].items()}}
        return e

    if isinstance(raw, list):
        return [entry(e) for e in raw]
    if isinstance(raw, tuple):
        return tuple(entry(e) for e in raw)
    return raw


def check_accepted_item(item, raw_type: Any) -> None:
    assert item.status is ItemStatus.PROCESSING and item.phase is None and item.error is None
    assert item.type is ItemType(raw_type)
    data = item.data
    if isinstance(data, (FileItemData, DirectoryItemData)):
        assert os.path.isabs(data.path) and data.source == data.path and os.path.exists(data.path)
        assert os.path.isdir(data.path) == isinstance(data, DirectoryItemData)
    elif isinstance(data, NoteItemData):
        assert data.content.strip() and data.source == (data.source_url or "note")
    else:
        assert data.source == data.url and data.url.lower().startswith(("http://", "https://"))


def test_fuzz_item_inputs(runner, world):
    w = world

    @settings(max_examples=EXAMPLES["items"])
    @given(raw=item_lists)
    def run(raw):
        raw = resolve_paths(raw, w)

        async def go():
            async def call():
                valid = validate_item_inputs(raw)
                return await w.items.create_roots(w.base.id, valid)

            created = await attempt(w, call)
            if created is not None:
                assert 1 <= len(created) <= MAX_INPUTS_PER_CALL
                for item, entry in zip(created, raw, strict=True):
                    check_accepted_item(item, (entry.type if isinstance(entry, ItemInput) else entry["type"]))
                    assert await w.items.get(item.id) == item
                await w.items.delete([i.id for i in created])  # back to the baseline world

        runner.run(go())

    run()


# --- base configuration --------------------------------------------------------------------

emoji_values = st.one_of(
    st.sampled_from(["📁", "👩‍👩‍👧", "🇫🇷", "🇫🇷🇩🇪", " 📁", "📁 ", "", "ab", "e\u0301", "e" + "\u0301" * 30, "\ud83d",
                     "\x00", "👍🏽", "❤️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]),
    hostile_text,
)
plausible = {
    "name": st.one_of(st.text(max_size=12), hostile_text),
    "emoji": emoji_values,
    "group_id": st.one_of(st.none(), st.just("GROUP"), st.uuids().map(str), hostile_text),
    "rerank_model_id": st.one_of(st.none(), st.sampled_from(["jina::r", "r::", "::m", "nocolon"]), hostile_text),
    "chunk_size": st.one_of(st.integers(-5, 3000), st.sampled_from([16, 15, 100_000, 100_001])),
    "chunk_overlap": st.integers(-5, 3000),
    "threshold": st.one_of(st.none(), st.floats(-0.5, 1.5), st.sampled_from(SPECIAL_FLOATS), st.integers(-1, 2)),
    "document_count": st.one_of(st.none(), st.integers(-3, 1200)),
    "search_mode": st.one_of(st.sampled_from(["default", "bm25", "hybrid", "vector", "HYBRID", ""]),
                             st.sampled_from(list(SearchMode))),
    "hybrid_alpha": st.one_of(st.none(), st.floats(-0.5, 1.5), st.sampled_from(SPECIAL_FLOATS)),
}
field_names = st.one_of(
    st.sampled_from(list(BASE_PATCHABLE)), st.sampled_from(list(BASE_IMMUTABLE + BASE_READONLY)),
    st.text(max_size=10), st.integers(), st.none(),
)


@st.composite
def base_patches(draw) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(junk)
    patch: dict[Any, Any] = {}
    for _ in range(draw(st.integers(0, 4))):
        key = draw(field_names)
        if key in plausible and draw(st.integers(0, 4)):
            patch[key] = draw(plausible[key])
        else:
            patch[key] = draw(scalar_junk)
    return patch


def check_base(base: KnowledgeBase) -> None:
    assert base.name == base.name.strip() and base.name
    assert len(regex.findall(r"\X", base.emoji)) == 1 and base.emoji == base.emoji.strip()
    assert 16 <= base.chunk_size <= 100_000 and 0 <= base.chunk_overlap < base.chunk_size
    assert base.threshold is None or 0 <= base.threshold <= 1
    assert base.document_count is None or base.document_count >= 1
    assert base.hybrid_alpha is None or (base.search_mode is SearchMode.HYBRID and 0 <= base.hybrid_alpha <= 1)


def test_fuzz_update_base(runner, world):
    w = world

    @settings(max_examples=EXAMPLES["patches"])
    @given(patch=base_patches(), target=st.sampled_from(["base", "base", "base", "unknown", "junk"]),
           bad_id=scalar_junk)
    def run(patch, target, bad_id):
        if isinstance(patch, dict) and patch.get("group_id") == "GROUP":
            patch["group_id"] = w.group_id
        base_id = {"base": w.base.id, "unknown": "0f0f-unknown", "junk": bad_id}[target]

        async def go():
            before = await w.bases.get(w.base.id)
            updated = await attempt(w, lambda: w.bases.update(base_id, patch),
                                    not_found_ok=well_formed_id(base_id))
            if updated is not None:
                check_base(updated)
                assert (updated.embedding_model_id, updated.dimensions, updated.id, updated.created_at) == (
                    before.embedding_model_id, before.dimensions, before.id, before.created_at)
                if before.search_mode is not SearchMode.HYBRID and updated.search_mode is SearchMode.HYBRID:
                    assert updated.hybrid_alpha == patch.get("hybrid_alpha", 0.5) or "hybrid_alpha" in patch
                for key, value in patch.items():
                    if key in ("threshold", "document_count", "rerank_model_id", "group_id") and value is None:
                        assert getattr(updated, key) is None
                assert await w.bases.get(w.base.id) == updated

        runner.run(go())

    run()


def test_fuzz_create_base(runner, world):
    w = world

    @settings(max_examples=EXAMPLES["creates"])
    @given(
        name=st.one_of(st.text(max_size=10), hostile_text, scalar_junk),
        model=st.one_of(st.sampled_from(["builtin::wordllama", "ollama::nomic", "x", "::", "a::", "a::b\x00"]),
                        hostile_text, scalar_junk),
        dims=st.one_of(st.integers(-2, 70_000), scalar_junk),
        config=st.one_of(base_patches(), st.none()),
    )
    def run(name, model, dims, config):
        if isinstance(config, dict) and config.get("group_id") == "GROUP":
            config["group_id"] = w.group_id

        async def go():
            created = await attempt(
                w, lambda: w.bases.create(name=name, embedding_model_id=model, dimensions=dims, config=config)
            )
            if created is not None:
                check_base(created)
                assert created.embedding_model_id == model.strip() and created.dimensions == dims
                await w.bases.delete(created.id)

        runner.run(go())

    run()


# --- ids, pages, names ----------------------------------------------------------------------------

ids = st.one_of(
    st.uuids().map(str),
    st.text(alphabet="0123456789abcdef-", min_size=1, max_size=40),
    st.text(max_size=30),
    hostile_text,
    scalar_junk,
)


def test_fuzz_ids(runner, world):
    w = world

    @settings(max_examples=EXAMPLES["ids"])
    @given(ident=ids, which=st.integers(0, 9))
    def run(ident, which):
        ok = well_formed_id(ident)
        calls = [
            lambda: w.bases.get(ident),
            lambda: w.bases.delete(ident),
            lambda: w.bases.update(ident, {"name": "x"}),
            lambda: w.bases.rename_group(ident, "x"),
            lambda: w.bases.delete_group(ident),
            lambda: w.items.get(ident),
            lambda: w.items.list_page(ident),
            lambda: w.items.list_page(w.base.id, group_id=ident),
            lambda: w.items.collapse_to_roots(w.base.id, [ident]),
            lambda: w.bases.update(w.base.id, {"group_id": ident}),
        ]

        async def go():
            result = await attempt(w, calls[which], not_found_ok=ok)
            if which == 7 and result is not None and ok:  # (None = roots, ANY_GROUP = all)
                assert result.total == 0 and result.items == []

        runner.run(go())

    run()


def test_fuzz_pages_and_filters(runner, world):
    w = world

    @settings(max_examples=EXAMPLES["pages"])
    @given(page=st.one_of(st.integers(-3, 5), st.just(10**9), st.just(10**9 + 1), scalar_junk),
           limit=st.one_of(st.integers(-3, 120), scalar_junk),
           type_=st.one_of(st.none(), st.sampled_from(["file", "note", "directory", "pdf"]), scalar_junk),
           group=st.one_of(st.none(), st.just(ANY_GROUP), st.sampled_from(["ROOT_DIR"]), scalar_junk),
           which=st.booleans())
    def run(page, limit, type_, group, which):
        group_id = w.item_ids[0] if group == "ROOT_DIR" else group

        async def go():
            if which:
                result = await attempt(w, lambda: w.bases.list_page(page, limit))
            else:
                result = await attempt(w, lambda: w.items.list_page(w.base.id, type=type_, group_id=group_id,
                                                               page=page, limit=limit))
            if result is not None:
                assert 1 <= result.limit <= 100 and len(result.items) <= result.limit and result.page >= 1
                keys = [(i.created_at, i.id) for i in result.items]
                assert keys == sorted(keys, reverse=True)

        runner.run(go())

    run()


def test_fuzz_collapse_to_roots(runner, world):
    w = world

    @settings(max_examples=EXAMPLES["collapse"])
    @given(picks=st.lists(st.one_of(st.integers(0, 10), ids), max_size=6), as_tuple=st.booleans(),
           raw=st.one_of(st.none(), junk), use_raw=st.integers(0, 9))
    def run(picks, as_tuple, raw, use_raw):
        known = [*w.item_ids, w.foreign_item_id]
        chosen = [known[p % len(known)] if isinstance(p, int) and not isinstance(p, bool) else p for p in picks]
        selection = raw if use_raw == 0 else (tuple(chosen) if as_tuple else chosen)
        plausible_ids = isinstance(selection, (list, tuple)) and bool(selection) and all(
            well_formed_id(i) for i in selection)

        async def go():
            roots = await attempt(w, lambda: w.items.collapse_to_roots(w.base.id, selection),
                                  not_found_ok=plausible_ids)
            if roots is not None:
                assert all(r.base_id == w.base.id for r in roots)
                chosen_ids = set(selection)
                assert {r.id for r in roots} <= chosen_ids
                for r in roots:  # no kept item has a selected ancestor
                    parent = r.group_id
                    while parent is not None:
                        assert parent not in chosen_ids
                        parent = (await w.items.get(parent)).group_id

        runner.run(go())

    run()


def test_fuzz_group_names(runner, world):
    w = world

    @settings(max_examples=EXAMPLES["groups"])
    @given(name=st.one_of(st.text(max_size=20), hostile_text, scalar_junk), rename=st.booleans())
    def run(name, rename):
        async def go():
            if rename:
                group = await attempt(w, lambda: w.bases.rename_group(w.group_id, name))
            else:
                group = await attempt(w, lambda: w.bases.create_group(name))
            if group is not None:
                assert group.name == name.strip() and 0 < len(group.name) <= 200
                assert group.id in {g.id for g in await w.bases.list_groups()}
                if not rename:
                    await w.bases.delete_group(group.id)

        runner.run(go())

    run()

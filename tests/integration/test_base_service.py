"""BaseWrites on a real catalogue, SQLite and PostgreSQL alike (tests/support/catalogues.py):
creation defaults, paging and order, update_base rules, groups."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import ktui.core.data.base_writes as base_writes_module
import ktui.core.ids as idsmod
from ktui.core.data.base_writes import BaseWrites
from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import BaseStatus, KnowledgeBaseErrorCode, SearchMode
from tests.support.catalogues import catalogue_fixture, statement_conn

MODEL = "builtin::wordllama"

db = catalogue_fixture()


@pytest.fixture
def bases(db) -> BaseWrites:
    return BaseWrites(db)


async def make(bases: BaseWrites, name: str = "Base", **config):
    return await bases.create(name=name, embedding_model_id=MODEL, dimensions=64, config=config)


def only_field(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    (name,) = exc.value.errors
    return name


# --- creation --------------------------------------------------------------------


async def test_create_fills_the_design_defaults(bases):
    base = await make(bases, "  Notes  ")
    assert base.name == "Notes"
    assert base.emoji == "📁"
    assert (base.chunk_size, base.chunk_overlap) == (1024, 200)
    assert base.search_mode is SearchMode.HYBRID and base.hybrid_alpha == 0.5
    assert base.threshold is None and base.document_count is None and base.top_k == 10
    assert base.status is BaseStatus.COMPLETED and base.error is None and base.is_usable
    assert (base.embedding_model_id, base.dimensions) == (MODEL, 64)
    assert base.group_id is None and base.rerank_model_id is None
    assert base.created_at == base.updated_at
    assert await bases.get(base.id) == base


async def test_create_with_config(bases):
    base = await make(bases, emoji="🇫🇷", search_mode="bm25", chunk_size=100, threshold=0.3, document_count=5,
                      rerank_model_id="jina::reranker")
    assert base.emoji == "🇫🇷"
    assert base.search_mode is SearchMode.BM25 and base.hybrid_alpha is None
    assert (base.chunk_size, base.chunk_overlap) == (100, 99)  # default overlap shrinks under a small chunk
    assert (base.threshold, base.document_count, base.top_k) == (0.3, 5, 5)
    assert base.rerank_model_id == "jina::reranker"


async def test_create_uses_settings_defaults(bases):
    base = await bases.create(name="B", embedding_model_id=MODEL, dimensions=8,
                              defaults={"chunk_size": 300, "chunk_overlap": 30})
    assert (base.chunk_size, base.chunk_overlap) == (300, 30)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": ""}, "name"),
        ({"embedding_model_id": "wordllama"}, "embedding_model_id"),
        ({"dimensions": 0}, "dimensions"),
        ({"dimensions": "64"}, "dimensions"),
        ({"config": {"search_mode": "bm25", "hybrid_alpha": 0.4}}, "hybrid_alpha"),
        ({"config": {"chunk_size": 100, "chunk_overlap": 100}}, "chunk_overlap"),
        ({"config": {"embedding_model_id": "a::b"}}, "embedding_model_id"),
        ({"config": {"name": "x"}}, "name"),
        ({"config": {"group_id": "no-such-group"}}, "group_id"),
        ({"config": {"emoji": "📁 "}}, "emoji"),
        ({"config": "hybrid"}, "config"),
    ],
)
async def test_create_refusals_leave_no_row(bases, kwargs, field):
    args = {"name": "B", "embedding_model_id": MODEL, "dimensions": 8, **kwargs}
    with pytest.raises(ValidationError) as exc:
        await bases.create(**args)
    assert only_field(exc) == field
    assert (await bases.list_page()).total == 0


async def test_create_failed_base(bases):
    base = await bases.create_failed(name="Imported", dimensions=None)
    assert base.status is BaseStatus.FAILED
    assert base.error is KnowledgeBaseErrorCode.MISSING_EMBEDDING_MODEL
    assert base.embedding_model_id is None and base.dimensions is None and not base.is_usable
    kept = await bases.create_failed(name="Imported", dimensions=384)
    assert kept.dimensions == 384


async def test_before_commit_failure_rolls_the_base_back(bases):
    async def explode(base):
        assert (await statement_conn(bases._db).execute_fetchall("SELECT id FROM knowledge_base"))[0][0] == base.id
        raise OSError("disk full")

    with pytest.raises(OSError):
        await bases.create(name="B", embedding_model_id=MODEL, dimensions=8, before_commit=explode)
    assert await bases.list_all() == []


async def test_get_and_delete_unknown_ids(bases):
    with pytest.raises(NotFoundError, match="Knowledge base not found: nope"):
        await bases.get("nope")
    with pytest.raises(NotFoundError):
        await bases.delete("nope")
    with pytest.raises(ValidationError):
        await bases.get("")
    base = await make(bases)
    await bases.delete(base.id)
    with pytest.raises(NotFoundError):
        await bases.get(base.id)


# --- paging and order --------------------------------------------------------------


async def test_pages_default_to_20_newest_first(bases):
    made = [await make(bases, f"B{i}") for i in range(45)]
    newest_first = [b.id for b in reversed(made)]
    first = await bases.list_page()
    assert (first.total, first.page, first.limit, first.pages) == (45, 1, 20, 3)
    assert [b.id for b in first.items] == newest_first[:20]
    third = await bases.list_page(page=3)
    assert [b.id for b in third.items] == newest_first[40:]
    assert (await bases.list_page(page=4)).items == []
    everything = await bases.list_page(limit=100)
    assert [b.id for b in everything.items] == newest_first
    assert [b.id for b in await bases.list_all()] == newest_first


async def test_limit_is_capped_at_100(bases):
    with pytest.raises(ValidationError) as exc:
        await bases.list_page(limit=101)
    assert only_field(exc) == "limit"
    with pytest.raises(ValidationError):
        await bases.list_page(page=0)


async def test_rows_created_in_the_same_instant_keep_creation_order(bases, monkeypatch):
    """Same created_at (and the same millisecond for the id clock): `id DESC` breaks the tie."""
    monkeypatch.setattr(base_writes_module, "utc_now", lambda: "2026-01-01T00:00:00.000000Z")
    frozen = 1_900_000_000_000 * 1_000_000
    monkeypatch.setattr(idsmod, "time", SimpleNamespace(time_ns=lambda: frozen))
    monkeypatch.setattr(idsmod, "_last_ms", idsmod._last_ms)  # restored afterwards
    monkeypatch.setattr(idsmod, "_seq", idsmod._seq)
    made = [await make(bases, f"B{i}") for i in range(130)]
    assert len({b.created_at for b in made}) == 1
    pages = [await bases.list_page(page=p, limit=50) for p in (1, 2, 3)]
    listed = [b.id for page in pages for b in page.items]
    assert listed == [b.id for b in reversed(made)]


# --- update_base --------------------------------------------------------------------


async def test_update_changes_only_the_patched_fields(bases):
    base = await make(bases)
    updated = await bases.update(base.id, {"name": "Renamed", "emoji": "👩‍👩‍👧", "threshold": 0.25, "document_count": 3})
    assert (updated.name, updated.emoji, updated.threshold, updated.document_count) == ("Renamed", "👩‍👩‍👧", 0.25, 3)
    assert updated.chunk_size == base.chunk_size and updated.search_mode == base.search_mode
    assert updated.created_at == base.created_at and updated.updated_at > base.updated_at
    assert await bases.get(base.id) == updated


@pytest.mark.parametrize("field", ["embedding_model_id", "dimensions"])
async def test_update_cannot_change_model_or_dimensions(bases, field):
    base = await make(bases)
    with pytest.raises(ValidationError, match="restore") as exc:
        await bases.update(base.id, {field: "ollama::other" if field == "embedding_model_id" else 128})
    assert only_field(exc) == field
    assert await bases.get(base.id) == base


async def test_leaving_hybrid_clears_alpha_and_entering_sets_the_default(bases):
    base = await make(bases, hybrid_alpha=0.8)
    assert base.hybrid_alpha == 0.8
    bm25 = await bases.update(base.id, {"search_mode": "bm25"})
    assert bm25.search_mode is SearchMode.BM25 and bm25.hybrid_alpha is None
    vector = await bases.update(base.id, {"search_mode": "default"})
    assert vector.hybrid_alpha is None
    back = await bases.update(base.id, {"search_mode": "hybrid"})
    assert back.hybrid_alpha == 0.5
    again = await bases.update(base.id, {"search_mode": "bm25"})
    chosen = await bases.update(again.id, {"search_mode": "hybrid", "hybrid_alpha": 0.2})
    assert chosen.hybrid_alpha == 0.2
    same = await bases.update(base.id, {"search_mode": "hybrid"})  # staying hybrid keeps the chosen alpha
    assert same.hybrid_alpha == 0.2


async def test_alpha_is_refused_outside_hybrid(bases):
    base = await make(bases, search_mode="bm25")
    with pytest.raises(ValidationError) as exc:
        await bases.update(base.id, {"hybrid_alpha": 0.3})
    assert only_field(exc) == "hybrid_alpha"
    hybrid = await make(bases, name="Hybrid")
    with pytest.raises(ValidationError) as exc:
        await bases.update(hybrid.id, {"search_mode": "default", "hybrid_alpha": 0.3})
    assert only_field(exc) == "hybrid_alpha"
    assert (await bases.get(hybrid.id)).search_mode is SearchMode.HYBRID


async def test_nullable_fields_can_be_cleared(bases):
    group = await bases.create_group("G")
    base = await make(bases, threshold=0.4, document_count=7, rerank_model_id="r::m", group_id=group.id)
    cleared = await bases.update(
        base.id, {"threshold": None, "document_count": None, "rerank_model_id": None, "group_id": None,
                  "hybrid_alpha": None}
    )
    assert (cleared.threshold, cleared.document_count, cleared.rerank_model_id, cleared.group_id) == (None,) * 4
    assert cleared.top_k == 10
    assert cleared.hybrid_alpha is None  # "use the default" (0.5) for the search runtime


@pytest.mark.parametrize("field", ["name", "emoji", "chunk_size", "chunk_overlap", "search_mode"])
async def test_required_fields_cannot_be_cleared(bases, field):
    base = await make(bases)
    with pytest.raises(ValidationError) as exc:
        await bases.update(base.id, {field: None})
    assert only_field(exc) == field


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"chunk_overlap": 1024}, "chunk_overlap"),
        ({"chunk_overlap": 5000}, "chunk_overlap"),
        ({"chunk_size": 200}, "chunk_overlap"),  # now smaller than the existing overlap
        ({"chunk_size": 100, "chunk_overlap": 100}, "chunk_overlap"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
        ({"document_count": 0}, "document_count"),
        ({"document_count": -3}, "document_count"),
        ({"emoji": ""}, "emoji"),
        ({"emoji": " 📁"}, "emoji"),
        ({"emoji": "📁 "}, "emoji"),
        ({"emoji": "📁📁"}, "emoji"),
        ({"emoji": "🇫🇷🇩🇪"}, "emoji"),
        ({"name": "  "}, "name"),
        ({"search_mode": "semantic"}, "search_mode"),
        ({"group_id": "no-such-group"}, "group_id"),
        ({"status": "failed"}, "status"),
        ({"hybrid_alpha": 1.01}, "hybrid_alpha"),
    ],
)
async def test_update_refusals_name_the_field_and_change_nothing(bases, patch, field):
    base = await make(bases)
    with pytest.raises(ValidationError) as exc:
        await bases.update(base.id, patch)
    assert only_field(exc) == field
    assert await bases.get(base.id) == base


async def test_update_accepts_valid_chunking_changes_together(bases):
    base = await make(bases)
    updated = await bases.update(base.id, {"chunk_size": 100, "chunk_overlap": 10})
    assert (updated.chunk_size, updated.chunk_overlap) == (100, 10)


@pytest.mark.parametrize("emoji", ["👩‍👩‍👧", "🇫🇷", "👍🏽", "❤️", "Z"])
async def test_update_accepts_single_cluster_emoji(bases, emoji):
    base = await make(bases)
    assert (await bases.update(base.id, {"emoji": emoji})).emoji == emoji


async def test_update_of_unknown_base(bases):
    with pytest.raises(NotFoundError):
        await bases.update("nope", {"name": "x"})
    with pytest.raises(ValidationError):
        await bases.update("nope", {})  # the patch is checked first


async def test_a_failed_base_can_still_be_renamed(bases):
    base = await bases.create_failed(name="Old", dimensions=None)
    renamed = await bases.update(base.id, {"name": "New", "search_mode": "bm25"})
    assert renamed.name == "New" and renamed.status is BaseStatus.FAILED and renamed.hybrid_alpha is None


# --- groups ------------------------------------------------------------------------------


async def test_group_lifecycle(bases):
    work = await bases.create_group(" Work ")
    home = await bases.create_group("home")
    assert work.name == "Work"
    assert [g.name for g in await bases.list_groups()] == ["home", "Work"]  # case-insensitive by name
    renamed = await bases.rename_group(home.id, "Archive")
    assert (renamed.id, renamed.name, renamed.created_at) == (home.id, "Archive", home.created_at)
    assert [g.name for g in await bases.list_groups()] == ["Archive", "Work"]
    await bases.delete_group(home.id)
    assert [g.id for g in await bases.list_groups()] == [work.id]


async def test_group_names_are_unique_regardless_of_case(bases):
    work = await bases.create_group("Work")
    home = await bases.create_group("Home")
    for clash in ("Work", "work", " WORK "):
        with pytest.raises(ValidationError, match="a group named 'Work' already exists") as exc:
            await bases.create_group(clash)
        assert only_field(exc) == "name"
    with pytest.raises(ValidationError, match="already exists"):
        await bases.rename_group(home.id, "work")
    assert (await bases.rename_group(work.id, "WORK")).name == "WORK"  # its own name, new case: fine
    assert sorted(g.name for g in await bases.list_groups()) == ["Home", "WORK"]


async def test_deleting_a_group_ungroups_its_bases(bases):
    group = await bases.create_group("G")
    other = await bases.create_group("Other")
    inside = await make(bases, "in", group_id=group.id)
    moved = await bases.update((await make(bases, "moved")).id, {"group_id": group.id})
    elsewhere = await make(bases, "elsewhere", group_id=other.id)
    assert moved.group_id == group.id
    await bases.delete_group(group.id)
    assert (await bases.get(inside.id)).group_id is None
    assert (await bases.get(moved.id)).group_id is None
    assert (await bases.get(elsewhere.id)).group_id == other.id
    assert (await bases.list_page()).total == 3  # the bases stay


async def test_group_refusals(bases):
    for bad in ("", "  ", "a\nb", None, 7):
        with pytest.raises(ValidationError) as exc:
            await bases.create_group(bad)
        assert only_field(exc) == "name"
    with pytest.raises(NotFoundError):
        await bases.rename_group("nope", "x")
    with pytest.raises(NotFoundError):
        await bases.delete_group("nope")
    group = await bases.create_group("G")
    with pytest.raises(ValidationError):
        await bases.rename_group(group.id, "")
    assert [g.name for g in await bases.list_groups()] == ["G"]

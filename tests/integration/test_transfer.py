"""Export / import through the facade, on a real data directory and a real embedding server.

Covers both document shapes (ktui's export and a legacy desktop-client data.json),
bases whose embedding model is missing here (kept as failed data, refused for
indexing and search, recovered by restore_base), and the import report.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.errors import BaseUnavailableError, NotFoundError, ValidationError
from ktui.core.models import (
    ANY_GROUP,
    BaseStatus,
    ItemInput,
    ItemStatus,
    ItemType,
    KnowledgeBaseErrorCode,
    SearchMode,
)
from ktui.core.naming import resolve_base
from ktui.core.transfer import (
    EXPORT_FORMAT,
    BaseImportReport,
    parse_document,
    read_document,
)
from ktui.core.transfer.cleaning import clean_config
from tests.support.embedding_server import (
    embedding_server_fixture,
    start_embedding_server,
)
from tests.support.services import FAKE_MODEL, open_service, write_files

DIMS = 32


server = embedding_server_fixture(DIMS)


def legacy_backup(bases: list[dict], notes: list[dict] = (), files: list[dict] = (), version: int = 5) -> dict:
    """The real nesting: persist:cherry-studio is a JSON string whose slices are JSON strings."""
    persisted = {"knowledge": json.dumps({"bases": bases}), "llm": json.dumps({"providers": []})}
    return {
        "time": 1_700_000_000_000,
        "version": version,
        "localStorage": {"persist:cherry-studio": json.dumps(persisted)},
        "indexedDB": {"knowledge_notes": list(notes), "files": list(files)},
    }


async def all_items(ks, base_id):
    page = await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)
    return page.items


async def test_export_then_import_recreates_the_base(server, tmp_path):
    docs = write_files(tmp_path / "docs", {"a.md": "# Alpha\nzebras graze on savanna grass", "sub/b.txt": "otters juggle pebbles"})
    single = write_files(tmp_path / "single", {"c.txt": "volcanoes erupt molten lava"}) / "c.txt"
    async with open_service(tmp_path / "one", server.url) as ks:
        group = await ks.create_group("Research")
        base = await ks.create_base("Field notes", emoji="🦓", group_id=group.id, chunk_size=300, chunk_overlap=30,
                                    threshold=0.1, document_count=7, search_mode="default")
        await ks.add_items(base.id, [
            ItemInput("directory", {"path": str(docs), "watch": True}),
            ItemInput("file", {"path": str(single)}),
            ItemInput("note", {"content": "penguins huddle in winter", "source_url": "https://example.org/p"}),
        ])
        assert await ks.wait_idle(timeout=20)
        doc = await ks.export_base(base.id)

    assert doc["format"] == EXPORT_FORMAT and doc["version"] == 1
    (entry,) = doc["bases"]
    assert entry["name"] == "Field notes" and entry["group"] == "Research" and entry["emoji"] == "🦓"
    assert (entry["embedding_model_id"], entry["dimensions"]) == (FAKE_MODEL, DIMS)
    assert (entry["chunk_size"], entry["chunk_overlap"], entry["threshold"], entry["document_count"]) == (300, 30, 0.1, 7)
    assert entry["search_mode"] == "default" and entry["hybrid_alpha"] is None
    # Root items only (the directory's children are regenerated), notes with their content.
    assert sorted((i["type"], json.dumps(i["data"], sort_keys=True)) for i in entry["items"]) == sorted([
        ("directory", json.dumps({"path": str(docs), "watch": True}, sort_keys=True)),
        ("file", json.dumps({"path": str(single)}, sort_keys=True)),
        ("note", json.dumps({"content": "penguins huddle in winter", "source_url": "https://example.org/p"}, sort_keys=True)),
    ])
    # The document survives a file round trip.
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc), encoding="utf-8")

    async with open_service(tmp_path / "two", server.url) as ks:
        report = await ks.import_bases(read_document(path))
        assert report.ok and report.format == EXPORT_FORMAT
        (b,) = report.bases
        assert b.status == "completed" and b.kept == 3 and not b.skipped and not b.warnings
        base = await ks.get_base(b.base_id)
        assert base.status == BaseStatus.COMPLETED and base.embedding_model_id == FAKE_MODEL
        assert (base.chunk_size, base.chunk_overlap, base.threshold, base.document_count) == (300, 30, 0.1, 7)
        assert base.search_mode == SearchMode.DEFAULT and base.emoji == "🦓"
        groups = await ks.list_groups()
        assert [g.name for g in groups] == ["Research"] and base.group_id == groups[0].id
        assert await ks.wait_idle(timeout=20)
        items = await all_items(ks, base.id)
        assert {i.status for i in items} == {ItemStatus.COMPLETED}
        assert len(items) == 6  # directory, its sub-directory and two files, the file, the note
        top = (await ks.search(base.id, "otters juggle", top_k=1)).results[0]
        assert top.page_content == "otters juggle pebbles"


async def test_missing_model_base_is_kept_as_data_and_restored(server, tmp_path):
    doc = {
        "format": EXPORT_FORMAT,
        "version": 1,
        "bases": [{
            "name": "Old laptop",
            "embedding_model_id": "ollama::dengcao/Qwen3-Embedding-0.6B:Q8_0",
            "dimensions": 1024,
            "chunk_size": 512,
            "items": [
                {"type": "note", "data": {"content": "kangaroos carry joeys in pouches"}},
                {"type": "file", "data": {"path": str(tmp_path / "gone" / "missing.pdf")}},
                {"type": "url", "data": {"url": "https://example.org/page"}},
            ],
        }],
    }
    async with open_service(tmp_path / "home", server.url) as ks:
        report = await ks.import_bases(doc)
        (b,) = report.bases
        assert report.ok and b.status == "failed" and b.kept == 3
        assert "provider 'ollama' is not configured here" in b.reason
        base = await ks.get_base(b.base_id)
        assert base.status == BaseStatus.FAILED
        assert base.error == KnowledgeBaseErrorCode.MISSING_EMBEDDING_MODEL
        assert base.embedding_model_id is None and base.dimensions == 1024 and base.chunk_size == 512
        items = await all_items(ks, base.id)
        assert len(items) == 3 and {i.status for i in items} == {ItemStatus.IDLE}

        # Refused until restored, with a message that says so.
        for attempt in (
            ks.search(base.id, "kangaroos"),
            ks.add_items(base.id, [ItemInput("note", {"content": "more"})]),
            ks.reindex_items(base.id, [items[0].id]),
        ):
            with pytest.raises(BaseUnavailableError, match="restore"):
                await attempt

        # A missing file blocks restore (restore is all-or-nothing): remove it, then restore.
        missing = next(i for i in items if i.type == ItemType.FILE)
        url = next(i for i in items if i.type == ItemType.URL)
        await ks.delete_items(base.id, [missing.id, url.id])
        restored = await ks.restore_base(base.id, FAKE_MODEL, DIMS, name="Restored")
        assert restored.status == BaseStatus.COMPLETED and restored.chunk_size == 512
        assert await ks.wait_idle(timeout=20)
        hit = (await ks.search(restored.id, "kangaroos pouches")).results[0]
        assert hit.page_content == "kangaroos carry joeys in pouches"
        assert (await ks.get_base(base.id)).status == BaseStatus.FAILED  # the source stays


async def test_model_unknown_to_its_provider_makes_a_failed_base(tmp_path):
    strict = start_embedding_server(DIMS, models=["known"], strict_models=True)
    try:
        doc = {"format": EXPORT_FORMAT, "version": 1, "bases": [
            {"name": "A", "embedding_model_id": "fake::nonexistent", "dimensions": -3,
             "items": [{"type": "note", "data": {"content": "x marks the spot"}}]},
            {"name": "B", "embedding_model_id": "fake::known", "dimensions": DIMS,
             "items": [{"type": "note", "data": {"content": "y marks the spot"}}]},
        ]}
        async with open_service(tmp_path / "home", strict.url) as ks:
            report = await ks.import_bases(doc)
            a, b = report.bases
            assert a.status == "failed" and "fake::nonexistent" in a.reason and a.dimensions is None
            assert (await ks.get_base(a.base_id)).dimensions is None  # invalid width -> unknown
            assert b.status == "completed" and b.dimensions == DIMS
            assert await ks.wait_idle(timeout=20)
    finally:
        strict.stop()


async def test_runnable_base_skips_paths_that_do_not_exist_here(server, tmp_path):
    real = write_files(tmp_path / "d", {"here.txt": "herons wade in shallow water"}) / "here.txt"
    doc = {"format": EXPORT_FORMAT, "version": 1, "bases": [{
        "name": "Mixed", "embedding_model_id": FAKE_MODEL, "dimensions": DIMS,
        "rerank_model_id": "nowhere::reranker",
        "items": [
            {"type": "file", "data": {"path": str(real)}},
            {"type": "file", "data": {"path": str(tmp_path / "elsewhere.txt")}},
            {"type": "directory", "data": {"path": str(tmp_path / "nodir")}},
            {"type": "note", "data": {"content": "dup"}},
            {"type": "note", "data": {"content": "dup"}},
            {"type": "bogus", "data": {}},
            "not an object",
        ],
    }]}
    async with open_service(tmp_path / "home", server.url) as ks:
        (b,) = (await ks.import_bases(doc)).bases
        assert b.status == "completed" and b.kept == 2
        reasons = {s.label: s.reason for s in b.skipped}
        assert len(b.skipped) == 5
        assert any("does not exist" in r and "elsewhere.txt" in r for r in reasons.values())
        assert any("nodir" in r for r in reasons.values())
        assert "duplicate of an earlier item" in reasons.values()
        assert any("unknown item type 'bogus'" in r for r in reasons.values())
        assert any("rerank model 'nowhere::reranker'" in w and "cleared" in w for w in b.warnings)
        assert (await ks.get_base(b.base_id)).rerank_model_id is None
        assert await ks.wait_idle(timeout=20)


async def test_legacy_backup_import_restore_search(server, tmp_path):
    kept_file = write_files(tmp_path / "files", {"guide.md": "# Guide\nbeekeepers harvest honey in summer"}) / "guide.md"
    bases = [
        {
            "id": "kb-1", "name": "Available", "model": {"id": "deterministic", "provider": "fake", "name": "det"},
            "dimensions": DIMS, "chunkSize": 400, "threshold": 1.5, "documentCount": 6,
            "rerankModel": {"id": "bge-reranker", "provider": "silicon"},
            "items": [
                {"id": "n1", "type": "note", "content": "stale body"},
                {"id": "f1", "type": "file", "content": {"id": "file-1", "name": "guide.md", "origin_name": "guide.md"}},
                {"id": "m1", "type": "memory", "content": "user likes tea"},
                {"id": "v1", "type": "video", "content": {"id": "vid"}},
                {"id": "n1", "type": "note", "content": "duplicate id"},
                {"id": "u1", "type": "url", "content": "not a url"},
                {"id": "u2", "type": "url", "content": "http://127.0.0.1:9/honey"},
                {"id": "u3", "type": "url", "content": "http://127.0.0.1:9/honey"},
                {"id": "x1", "type": "whiteboard", "content": "?"},
                {"id": "n3", "type": "note", "content": "Drones do not sting.", "sourceUrl": "file:///local"},
            ],
        },
        {
            "id": "kb-2", "name": "Orphaned", "model": {"id": "dengcao/Qwen3-Embedding-0.6B:Q8_0", "provider": "ollama"},
            "dimensions": 1024, "chunkSize": 100, "chunkOverlap": 150, "documentCount": 0,
            "items": [
                {"id": "n2", "type": "note", "content": "fallback body: walruses bask on ice floes"},
                {"id": "f2", "type": "file", "content": {"id": "file-2", "path": "/nowhere/old/report.pdf"}},
                {"id": "d2", "type": "directory", "content": "/nowhere/old/folder"},
                {"id": "s2", "type": "sitemap", "content": "https://example.org/sitemap.xml"},
            ],
        },
        "garbage",
    ]
    backup = legacy_backup(
        bases,
        notes=[{"id": "n1", "baseId": "kb-1", "type": "note", "content": "fresh body: bees dance to share directions"},
               {"id": "n2", "baseId": "kb-2", "type": "note", "content": ""}],
        files=[{"id": "file-1", "name": "guide.md", "path": str(kept_file), "size": 10}],
    )
    async with open_service(tmp_path / "home", server.url) as ks:
        report = await ks.import_bases(backup)
        assert report.format == "legacy-backup"
        assert [s.reason for s in report.skipped_bases] == ["not an object"] and not report.ok
        avail, orphan = report.bases

        # The available base: created completed, items queued, report explains the rest.
        assert avail.status == "completed" and avail.embedding_model_id == "fake::deterministic"
        assert avail.kept == 4  # two notes (one from knowledge_notes), the file, one url
        reasons = [s.reason for s in avail.skipped]
        assert "memory items are not supported by ktui" in reasons
        assert "video items are not supported by ktui" in reasons
        assert "duplicate item id" in reasons and "duplicate of an earlier item" in reasons
        assert any("Invalid knowledge url" in r for r in reasons)
        assert "unknown item type 'whiteboard'" in reasons
        assert any("note n3: source URL 'file:///local' is not an http(s) URL; dropped" == w for w in avail.warnings)
        assert any(w.startswith("threshold 1.5 dropped") for w in avail.warnings)
        assert any("rerank model 'silicon::bge-reranker'" in w for w in avail.warnings)
        base = await ks.get_base(avail.base_id)
        assert (base.chunk_size, base.chunk_overlap, base.threshold, base.document_count) == (400, 200, None, 6)
        assert base.rerank_model_id is None and base.search_mode == SearchMode.DEFAULT
        notes = [i for i in await all_items(ks, base.id) if i.type == ItemType.NOTE]
        assert sorted(n.data.content for n in notes) == ["Drones do not sting.", "fresh body: bees dance to share directions"]

        # The orphaned base: failed, everything kept as idle data, legacy fixes reported.
        assert orphan.status == "failed" and orphan.kept == 4 and not orphan.skipped
        assert orphan.requested_model_id == "ollama::dengcao/Qwen3-Embedding-0.6B:Q8_0"
        assert any("top-K (document_count) 0 dropped" in w for w in orphan.warnings)
        assert any("chunk_overlap 150" in w for w in orphan.warnings)
        failed = await ks.get_base(orphan.base_id)
        assert failed.status == BaseStatus.FAILED and failed.dimensions == 1024
        assert (failed.chunk_size, failed.chunk_overlap, failed.document_count) == (100, 99, None)
        items = await all_items(ks, failed.id)
        assert {i.status for i in items} == {ItemStatus.IDLE} and len(items) == 4
        note = next(i for i in items if i.type == ItemType.NOTE)
        assert note.data.content == "fallback body: walruses bask on ice floes"

        # Drop the queued url (a closed local port) and finish the rest.
        url_item = next(i for i in await all_items(ks, base.id) if i.type == ItemType.URL)
        await ks.delete_items(base.id, [url_item.id])
        assert await ks.wait_idle(timeout=20)
        assert (await ks.search(base.id, "beekeepers honey")).results[0].page_content.endswith("honey in summer")

        # Restore the orphan with a model available here: drop what cannot exist on this machine first.
        await ks.delete_items(failed.id, [i.id for i in items if i.type != ItemType.NOTE])
        restored = await ks.restore_base(failed.id, FAKE_MODEL, DIMS)
        assert restored.name == "Orphaned (2)" and restored.chunk_overlap == 99  # the source keeps its name
        assert await ks.wait_idle(timeout=20)
        hits = (await ks.search(restored.id, "walruses ice")).results
        assert hits[0].page_content == "fallback body: walruses bask on ice floes"


async def test_export_of_a_failed_base_round_trips_as_failed(server, tmp_path):
    async with open_service(tmp_path / "home", server.url) as ks:
        report = await ks.import_bases(legacy_backup([
            {"id": "x", "name": "Lost", "model": {"id": "m", "provider": "nowhere"}, "dimensions": 8,
             "items": [{"id": "n", "type": "note", "content": "ibis probe mud"}]},
        ]))
        doc = await ks.export_base(report.bases[0].base_id)
        entry = doc["bases"][0]
        assert entry["status"] == "failed" and entry["error"] == "missing_embedding_model"
        assert entry["embedding_model_id"] is None and entry["dimensions"] == 8
        again = await ks.import_bases(doc)
        assert again.bases[0].status == "failed" and again.bases[0].reason == "the document names no embedding model"


async def test_resolve_base_and_item_by_name_prefix_and_source(server, tmp_path):
    f = write_files(tmp_path / "d", {"notes.txt": "lemurs leap"}) / "notes.txt"
    async with open_service(tmp_path / "home", server.url) as ks:
        a = await ks.create_base("Alpha")
        await ks.create_base("Twin")
        with pytest.raises(ValidationError, match="a base named 'Twin' already exists"):
            await ks.create_base("twin")
        other = await ks.create_base("Other")
        import sqlite3

        con = sqlite3.connect(tmp_path / "home" / "knowledge.db")  # a duplicate made before names were unique
        con.execute("UPDATE knowledge_base SET name = 'Twin' WHERE id = ?", (other.id,))
        con.commit()
        con.close()
        assert (await ks.resolve_base("Alpha")).id == a.id
        assert (await ks.resolve_base("alpha")).id == a.id
        assert (await ks.resolve_base(a.id)).id == a.id
        with pytest.raises(ValidationError, match="matches 2 bases"):
            await ks.resolve_base("Twin")
        with pytest.raises(NotFoundError):
            await ks.resolve_base("Nope")
        (item,) = await ks.add_items(a.id, [ItemInput("file", {"path": str(f)})])
        assert (await ks.resolve_item(a.id, item.id[:10])).id == item.id
        assert (await ks.resolve_item(a.id, str(f))).id == item.id
        assert (await ks.resolve_item(a.id, "notes.txt")).id == item.id
        with pytest.raises(NotFoundError):
            await ks.resolve_item(a.id, "other.txt")
        assert await ks.wait_idle(timeout=20)


def test_bad_documents_are_clear_errors(tmp_path):
    cases = [
        ({"format": EXPORT_FORMAT, "version": 99, "bases": []}, "newer than this ktui"),
        ({"format": EXPORT_FORMAT, "version": 1, "bases": {}}, "bases: must be a list"),
        ({"something": "else"}, "neither a ktui export"),
        (legacy_backup([], version=6), "backup version 6 is not supported"),
        ({"version": 5, "localStorage": {"persist:cherry-studio": "{not json"}}, "is not valid JSON"),
        ({"version": 5, "localStorage": {}}, "has no 'persist:cherry-studio' entry"),
        ({"version": 5, "localStorage": {"persist:cherry-studio": json.dumps({"knowledge": "[1]"})}},
         "knowledge: must hold a JSON object"),
    ]
    for doc, message in cases:
        with pytest.raises(ValidationError, match=message):
            parse_document(doc)
    bad = tmp_path / "bad.json"
    bad.write_text("{oops", encoding="utf-8")
    with pytest.raises(ValidationError, match="bad.json is not valid JSON"):
        read_document(bad)
    with pytest.raises(ValidationError, match="does not exist"):
        read_document(tmp_path / "absent.json")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
setting_names = st.sampled_from(["emoji", "rerank_model_id", "chunk_size", "chunk_overlap", "threshold",
                                 "document_count", "search_mode", "hybrid_alpha"])


@given(st.dictionaries(setting_names, json_values | st.integers(-5, 5000) | st.floats(-1, 2)))
def test_cleaned_config_is_always_acceptable(raw):
    """Whatever a document holds, the cleaned settings pass the base validator."""
    from ktui.core.data.base_writes import base_config

    report = BaseImportReport(name="x")
    cfg = clean_config(raw, report)
    base_config(cfg)  # raises ValidationError if cleaning let anything through
    assert cfg["chunk_overlap"] < cfg["chunk_size"]


@given(st.dictionaries(st.sampled_from(["format", "version", "bases", "localStorage", "indexedDB"]), json_values))
def test_hostile_documents_never_crash_the_parser(doc):
    try:
        parsed = parse_document(doc)
    except ValidationError:
        return
    for plan in parsed.plans:
        assert plan.name and plan.config["chunk_overlap"] < plan.config["chunk_size"]


@given(st.lists(st.fixed_dictionaries({"id": st.text(max_size=5), "type": st.sampled_from(
    ["note", "file", "url", "sitemap", "directory", "memory", "video", "other"]), "content": json_values}), max_size=8))
def test_legacy_items_are_kept_or_counted_never_lost(items):
    parsed = parse_document(legacy_backup([{"id": "b", "name": "B", "model": {"id": "m", "provider": "p"}, "items": items}]))
    (plan,) = parsed.plans
    assert len(plan.items) + len(plan.report.skipped) == len(items)


def test_resolve_base_lists_candidates_and_caps_the_list():
    from ktui.core.models import KnowledgeBase

    def base(i):
        return KnowledgeBase(f"id-{i:04d}", "Same", None, "📁", 4, "a::b", BaseStatus.COMPLETED, None, None,
                             100, 10, None, None, SearchMode.HYBRID, 0.5, "t", "t")

    with pytest.raises(ValidationError, match=r"matches 12 bases: .* and 4 more; name one by its id"):
        resolve_base([base(i) for i in range(12)], "Same")

"""`ktui mcp` through the official SDK's stdio client, against a real data directory.

The client starts `python -m ktui.tui.cli mcp` as a subprocess, lists the tools,
calls each one and compares the structured results with what the in-process
facade says about the same data directory.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ktui.core.models import ItemInput
from ktui.core.service import KnowledgeService
from tests.support.embedding_server import embedding_server_fixture
from tests.support.frontends import Workspace
from tests.support.services import write_files

server = embedding_server_fixture(32, scope="module")

READ_TOOLS = {"list_bases", "search", "list_items", "get_item", "read_chunk"}
WRITE_TOOLS = {"add_items", "reindex"}

OTTERS = ("# Otters\n\nSea otters hold hands while they sleep.\n\n## Food\n\nThey crack shellfish with stones.\n\n"
          "## Rivers\n\nRiver otters build dens in banks near water.\n")


@asynccontextmanager
async def mcp_session(ws: Workspace, *extra: str):
    cmd = ws.command("mcp", *extra)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=ws.env(), cwd=str(ws.work))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def populate(ws: Workspace) -> dict:
    docs = write_files(ws.work / "docs", {"otters.md": OTTERS, "volcano.txt": "Volcanoes erupt molten lava and ash.\n"})
    async with await KnowledgeService.open(settings=ws.settings()) as ks:
        notes = await ks.create_base("Notes", chunk_size=16, chunk_overlap=2)
        other = await ks.create_base("Other")
        added = await ks.add_items(notes.id, [ItemInput("directory", {"path": str(docs)})])
        await ks.add_items(other.id, [ItemInput("note", {"content": "Otters are mustelids of rivers and seas."})])
        assert await ks.wait_idle(timeout=60)
        return {"notes": notes.id, "other": other.id, "dir": added[0].id}


def ok(result):
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result) -> str:
    assert result.is_error
    return " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.slow
async def test_read_only_tools_answer_what_the_facade_answers(tmp_path, server):
    ws = Workspace(tmp_path, server.url)
    ids = await populate(ws)
    async with await KnowledgeService.open(settings=ws.settings(), read_only=True) as ks:
        facade_search = await ks.search(ids["notes"], "sea otters sleep", 3)
        facade_both = await ks.search_bases(None, "otters", 4)
        leaves = (await ks.list_items(ids["notes"], group_id=ids["dir"])).items
        otters = next(i for i in leaves if i.source.endswith("otters.md"))
        otter_chunks = await ks.list_item_chunks(ids["notes"], otters.id)
    assert len(otter_chunks) >= 3

    async with mcp_session(ws) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == READ_TOOLS  # no writes without --allow-writes
        assert tools["search"].input_schema["required"] == ["query"]
        assert tools["search"].output_schema is not None

        bases = ok(await session.call_tool("list_bases", {}))["bases"]
        assert {b["id"] for b in bases} == {ids["notes"], ids["other"]}
        assert next(b for b in bases if b["id"] == ids["notes"])["item_count"] == 3

        found = ok(await session.call_tool("search", {"query": "sea otters sleep", "bases": ["Notes"], "top_k": 3}))
        assert found["degraded"] is False
        assert [r["chunk_id"] for r in found["results"]] == [r.chunk_id for r in facade_search.results]
        # the raw score rounded to 6 decimals, the ranking the facade's (docs/mcp.md)
        assert [r["score"] for r in found["results"]] == [round(r.score, 6) for r in facade_search.results]
        assert any(r.score != round(r.score, 6) for r in facade_search.results)  # there was something to round
        first = found["results"][0]
        assert first["base_id"] == ids["notes"] and first["item_id"] == otters.id
        assert first["source"] == otters.source and "heading" in first and first["text"]

        both = ok(await session.call_tool("search", {"query": "otters", "top_k": 4}))
        assert set(both["bases"]) == {ids["notes"], ids["other"]}
        assert {r["base_id"] for r in both["results"]} == {ids["notes"], ids["other"]}
        # merged by relevance through the facade's search_bases, not by rank per base
        assert [r["chunk_id"] for r in both["results"]] == [r.chunk_id for r in facade_both.results]
        relevances = [r["relevance"] for r in both["results"]]
        assert relevances == sorted(relevances, reverse=True) and all(0 <= x <= 1 for x in relevances)
        assert [r["rank"] for r in both["results"]] == [1, 2, 3, 4]
        assert all(r["base_rank"] >= 1 and r["base_name"] in ("Notes", "Other") for r in both["results"])
        under = ok(await session.call_tool("search", {"query": "otters", "source_prefix": otters.source}))
        assert under["results"] and {r["source"] for r in under["results"]} == {otters.source}
        assert ok(await session.call_tool("search", {"query": "otters", "modified_after": "2999-01-01"}))["results"] == []
        assert "modified_after" in error_text(await session.call_tool("search", {"query": "x", "modified_after": "soon"}))
        notes_only = ok(await session.call_tool("search", {"query": "otters", "types": ["note"]}))
        assert notes_only["results"] and {r["metadata"]["item_type"] for r in notes_only["results"]} == {"note"}

        listed = ok(await session.call_tool("list_items", {"base": ids["notes"]}))
        assert [i["id"] for i in listed["items"]] == [ids["dir"]] and listed["total"] == 1
        children = ok(await session.call_tool("list_items", {"base": "Notes", "parent_id": ids["dir"]}))
        assert {i["id"] for i in children["items"]} == {i.id for i in leaves}

        item = ok(await session.call_tool("get_item", {"item_id": otters.id}))
        assert item["source"] == otters.source and item["status"] == "completed"

        middle = otter_chunks[1]
        read = ok(await session.call_tool("read_chunk", {"base": "Notes", "item_id": otters.id,
                                                        "chunk_id": middle.id, "neighbours": 1}))
        assert read["chunk"]["text"] == middle.text
        assert [c["id"] for c in read["before"]] == [otter_chunks[0].id]
        assert [c["id"] for c in read["after"]] == [otter_chunks[2].id]

        resources = await session.list_resources()
        assert "ktui://bases" in {str(r.uri) for r in resources.resources}

        # mistakes are tool errors naming the problem; the server keeps answering
        assert "Knowledge base not found" in error_text(await session.call_tool("search", {"query": "x", "bases": ["Nope"]}))
        assert "query" in error_text(await session.call_tool("search", {"query": "   "}))
        assert "top_k" in error_text(await session.call_tool("search", {"query": "otters", "top_k": 0}))
        assert "not found" in error_text(await session.call_tool("get_item", {"item_id": "no-such-item"}))
        assert "chunk_id" in error_text(await session.call_tool("read_chunk", {"base": "Notes", "item_id": otters.id,
                                                                              "chunk_id": "nope"}))
        assert ok(await session.call_tool("list_bases", {}))["bases"]


@pytest.mark.slow
async def test_allow_writes_adds_and_reindexes(tmp_path, server):
    ws = Workspace(tmp_path, server.url)
    ids = await populate(ws)
    async with mcp_session(ws, "--allow-writes") as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == READ_TOOLS | WRITE_TOOLS
        added = ok(await session.call_tool("add_items", {"base": "Other", "items": [
            {"type": "note", "content": "Kelp forests shelter otters from storms."}]}))
        note_id = added["items"][0]["id"]
        assert "type" in error_text(await session.call_tool("add_items", {"base": "Other", "items": [{"type": "memo"}]}))
        assert "path" in error_text(await session.call_tool("add_items", {"base": "Other", "items": [{"type": "file"}]}))
        again = ok(await session.call_tool("reindex", {"base": "Other", "item_ids": [note_id]}))
        assert [i["id"] for i in again["items"]] == [note_id]
        for _ in range(200):  # indexing runs in the server process; poll its state
            item = ok(await session.call_tool("get_item", {"item_id": note_id}))
            if item["status"] == "completed":
                break
            import anyio

            await anyio.sleep(0.05)
        assert item["status"] == "completed"
        found = ok(await session.call_tool("search", {"query": "kelp storms", "bases": ["Other"], "mode": "bm25"}))
        assert found["results"][0]["item_id"] == note_id
    async with await KnowledgeService.open(settings=ws.settings(), read_only=True) as ks:
        assert (await ks.get_item(note_id)).status.value == "completed"
        assert (await ks.get_base(ids["other"])).id == ids["other"]


@pytest.mark.slow
async def test_a_hit_on_a_file_whose_name_is_not_utf8_is_a_result_not_a_tool_error(tmp_path, server):
    """os.fsdecode gives the byte 0xff of a name a lone surrogate, which the SDK cannot
    serialise: the result shows it as U+FFFD, and its ids still lead to the item."""
    import os

    ws = Workspace(tmp_path, server.url)
    folder = ws.work / "bytes"
    folder.mkdir(parents=True)
    with open(os.path.join(os.fsencode(folder), b"bad-\xff name.md"), "wb") as handle:
        handle.write(b"# Otters\nOtters hold hands while they sleep.\n")
    async with await KnowledgeService.open(settings=ws.settings()) as ks:
        base = await ks.create_base("Bytes")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=60)

    async with mcp_session(ws) as session:
        found = ok(await session.call_tool("search", {"query": "otters hold hands", "mode": "bm25"}))
        hit = found["results"][0]
        assert hit["source"].endswith("bad-\ufffd name.md") and hit["text"].startswith("# Otters")
        item = ok(await session.call_tool("get_item", {"item_id": hit["item_id"]}))
        assert item["name"] == "bad-\ufffd name.md" and item["status"] == "completed"
        listed = ok(await session.call_tool("list_items", {"base": "Bytes", "all_levels": True}))
        assert "bad-\ufffd name.md" in {i["name"] for i in listed["items"]}

"""`ktui serve`: a real uvicorn process on 127.0.0.1, driven by a real HTTP client (httpx).

One server per module (starting one costs seconds on a busy machine); each test
makes its own bases. Schemathesis fuzzes every operation from the served
OpenAPI document and no answer may be a 5xx.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from ktui.core.service import KnowledgeService
from ktui.tui.http_api.openapi import build
from tests.support.embedding_server import embedding_server_fixture
from tests.support.frontends import ServeProcess, Workspace
from tests.support.services import write_files

pytestmark = pytest.mark.slow

server = embedding_server_fixture(32, scope="module")
OPENAPI_FILE = Path(__file__).resolve().parents[2] / "tui" / "http_api" / "openapi.json"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, server):
    return Workspace(tmp_path_factory.mktemp("serve"), server.url)


@pytest.fixture(scope="module")
def api(ws):
    proc = ServeProcess(ws)
    try:
        with httpx.Client(base_url=proc.url, timeout=60) as client:
            yield client
    finally:
        proc.stop()


def wait_completed(api: httpx.Client, item_id: str) -> dict:
    for _ in range(600):
        item = api.get(f"/knowledge-items/{item_id}").json()
        if item["status"] in ("completed", "failed"):
            return item
        time.sleep(0.05)
    raise AssertionError(f"item {item_id} still {item['status']}")


def fields_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]["fields"]


def test_workflow_and_data_api_match_the_facade(api, ws):
    docs = write_files(ws.work / "docs", {"otters.md": "# Otters\n\nSea otters hold hands while they sleep.\n"})
    created = api.post("/knowledge-bases", json={"name": "Web", "chunk_size": 64, "chunk_overlap": 8})
    assert created.status_code == 201, created.text
    base = created.json()
    bid = base["id"]
    assert base["embedding_model_id"] == "fake::deterministic" and base["item_count"] == 0

    added = api.post(f"/knowledge-bases/{bid}/items", json={"items": [
        {"type": "file", "data": {"path": str(docs / "otters.md")}},
        {"type": "note", "data": {"content": "Volcanoes erupt molten lava."}}]})
    assert added.status_code == 202, added.text
    file_id, note_id = (i["id"] for i in added.json()["items"])
    assert wait_completed(api, file_id)["status"] == "completed"
    assert wait_completed(api, note_id)["status"] == "completed"

    page = api.get("/knowledge-bases", params={"page": 1, "limit": 100}).json()
    assert bid in {b["id"] for b in page["items"]} and page["page"] == 1 and page["limit"] == 100
    assert api.get(f"/knowledge-bases/{bid}").json()["item_count"] == 2
    patched = api.patch(f"/knowledge-bases/{bid}", json={"emoji": "🦦", "document_count": 3})
    assert patched.status_code == 200 and patched.json()["emoji"] == "🦦" and patched.json()["top_k"] == 3
    items = api.get(f"/knowledge-bases/{bid}/items", params={"type": "note"}).json()
    assert [i["id"] for i in items["items"]] == [note_id] and items["total"] == 1

    found = api.post(f"/knowledge-bases/{bid}/search", json={"query": "sea otters sleep", "top_k": 2}).json()
    assert found["degraded"] is False and found["results"][0]["item_id"] == file_id
    many = api.post("/search", json={"query": "otters", "bases": [bid]}).json()
    assert many["results"][0]["base_id"] == bid
    other = api.post("/knowledge-bases", json={"name": "Web 2"}).json()["id"]
    more = api.post(f"/knowledge-bases/{other}/items", json={"items": [
        {"type": "note", "data": {"content": "Otters are mustelids of rivers and seas."}}]}).json()["items"][0]["id"]
    assert wait_completed(api, more)["status"] == "completed"
    both = api.post("/search", json={"query": "otters sleep", "bases": [bid, other], "top_k": 3}).json()
    assert [r["chunk_id"] for r in both["results"]] == _facade_merged(ws, [bid, other], "otters sleep", 3)
    relevances = [r["relevance"] for r in both["results"]]
    assert relevances == sorted(relevances, reverse=True) and {r["base_id"] for r in both["results"]} == {bid, other}
    assert all(r["base_rank"] >= 1 for r in both["results"])
    notes = api.post("/search", json={"query": "otters", "bases": [bid, other], "types": ["note"]}).json()
    assert more in {r["item_id"] for r in notes["results"]} <= {more, note_id}  # file_id is not a note
    after = api.post("/search", json={"query": "otters", "modified_after": "2999-01-01"}).json()
    assert after["results"] == []
    assert api.delete(f"/knowledge-bases/{other}").status_code == 204

    chunks = api.get(f"/knowledge-bases/{bid}/items/{file_id}/chunks").json()["chunks"]
    assert chunks and all(c["item_id"] == file_id for c in chunks)
    with_reader = _facade_view(ws, bid, "sea otters sleep")
    assert [r["chunk_id"] for r in found["results"]] == with_reader["chunk_ids"][:2]
    assert [c["id"] for c in chunks] == with_reader["chunks"][file_id]

    assert api.post(f"/knowledge-bases/{bid}/reindex-items", json={"item_ids": [note_id]}).status_code == 202
    assert wait_completed(api, note_id)["status"] == "completed"
    deleted = api.delete(f"/knowledge-bases/{bid}/items/{file_id}/chunks/{chunks[0]['id']}")
    assert deleted.status_code == 204
    assert api.post(f"/knowledge-bases/{bid}/delete-items", json={"item_ids": [note_id]}).status_code == 204
    assert api.get(f"/knowledge-items/{note_id}").status_code == 404

    restored = api.post(f"/knowledge-bases/{bid}/restore", json={"dimensions": 32, "name": "Web again",
                                                                  "embedding_model_id": "fake::other"})
    assert restored.status_code == 201, restored.text
    assert restored.json()["name"] == "Web again"
    assert api.delete(f"/knowledge-bases/{restored.json()['id']}").status_code == 204
    assert api.delete(f"/knowledge-bases/{bid}").status_code == 204
    assert api.get(f"/knowledge-bases/{bid}").status_code == 404


def _facade_merged(ws: Workspace, base_ids: list[str], query: str, top_k: int) -> list[str]:
    """The chunk ids a reader facade's search_bases returns for the same query."""
    import asyncio

    async def run() -> list[str]:
        async with await KnowledgeService.open(settings=ws.settings(), read_only=True) as ks:
            return [r.chunk_id for r in (await ks.search_bases(base_ids, query, top_k)).results]

    return asyncio.run(run())


def _facade_view(ws: Workspace, base_id: str, query: str) -> dict:
    """What a reader facade in this test process says about the same directory."""
    import asyncio

    async def run() -> dict:
        async with await KnowledgeService.open(settings=ws.settings(), read_only=True) as ks:
            response = await ks.search(base_id, query, 10)
            roots = (await ks.list_items(base_id, limit=100)).items
            return {"chunk_ids": [r.chunk_id for r in response.results],
                    "chunks": {i.id: [c.id for c in await ks.list_item_chunks(base_id, i.id)] for i in roots}}

    return asyncio.run(run())


def test_search_relevance_has_four_decimals_and_score_six_in_every_mode(api):
    """Hybrid relevance is alpha*vector + (1-alpha)*keyword: the sum of two rounded figures is
    not one (0.9254199999999999); both search endpoints show it rounded like the other modes.
    The raw score is rounded too (6 decimals: 0.837463, not 0.83746281...)."""
    base = api.post("/knowledge-bases", json={"name": "Rounding", "search_mode": "hybrid", "hybrid_alpha": 0.7})
    assert base.status_code == 201, base.text
    bid = base.json()["id"]
    notes = ["Sea otters hold hands while they sleep.", "Otters eat sea urchins and crabs.",
             "River otters sleep in dens.", "Badgers dig setts; otters swim.", "Hands of otters are webbed."]
    added = api.post(f"/knowledge-bases/{bid}/items", json={"items": [
        {"type": "note", "data": {"content": text}} for text in notes]}).json()["items"]
    assert all(wait_completed(api, i["id"])["status"] == "completed" for i in added)
    try:
        for query in ("sea otters sleep hands", "otters crabs dens webbed", "sleep"):
            for mode in ("hybrid", "default", "bm25"):
                one = api.post(f"/knowledge-bases/{bid}/search", json={"query": query, "mode": mode, "top_k": 5})
                many = api.post("/search", json={"query": query, "bases": [bid], "mode": mode, "top_k": 5})
                for response in (one, many):
                    assert response.status_code == 200, response.text
                    relevances = [r["relevance"] for r in response.json()["results"]]
                    assert relevances and relevances == [round(x, 4) for x in relevances], (mode, query, relevances)
                    scores = [r["score"] for r in response.json()["results"]]
                    assert scores == [round(x, 6) for x in scores], (mode, query, scores)
                    assert [r["rank"] for r in response.json()["results"]] == list(range(1, len(scores) + 1))
    finally:
        api.delete(f"/knowledge-bases/{bid}")


def test_bad_input_is_4xx_naming_the_field(api):
    bid = api.post("/knowledge-bases", json={"name": "Bad input"}).json()["id"]
    cases = [
        (api.get("/knowledge-bases", params={"page": "two"}), 422, "page"),
        (api.get("/knowledge-bases", params={"page": 0}), 422, "page"),
        (api.get("/knowledge-bases", params={"limit": 100000}), 422, "limit"),
        (api.get(f"/knowledge-bases/{bid}/items", params={"type": "memo"}), 422, "type"),
        (api.patch(f"/knowledge-bases/{bid}", json={"chunk_size": "big"}), 422, "chunk_size"),
        (api.patch(f"/knowledge-bases/{bid}", json={"embedding_model_id": "fake::x"}), 422, "embedding_model_id"),
        (api.patch(f"/knowledge-bases/{bid}", content=b"[1, 2]"), 422, "body"),
        (api.patch(f"/knowledge-bases/{bid}", content=b"{not json"), 422, "body"),
        (api.post("/knowledge-bases", json={"emoji": "x"}), 422, "name"),
        (api.post(f"/knowledge-bases/{bid}/search", json={"query": "   "}), 422, "query"),
        (api.post(f"/knowledge-bases/{bid}/search", json={"query": "otters", "top_k": "many"}), 422, "top_k"),
        (api.post(f"/knowledge-bases/{bid}/search", json={"query": "otters", "mode": "psychic"}), 422, "mode"),
        (api.post(f"/knowledge-bases/{bid}/items", json={"items": []}), 422, "items"),
        (api.post(f"/knowledge-bases/{bid}/items", json={"items": [{"type": "note", "data": {}}]}), 422, None),
        (api.post(f"/knowledge-bases/{bid}/reindex-items", json={"item_ids": ["x"], "force": "yes"}), 422, "force"),
    ]
    for response, status, field in cases:
        assert response.status_code == status, (response.request.url, response.text)
        fields = fields_of(response)
        if field is not None:
            assert field in fields, (field, response.text)
        else:
            assert fields, response.text
    for response in (api.get("/knowledge-bases/no-such-base"), api.get("/knowledge-items/no-such-item"),
                     api.get(f"/knowledge-bases/{bid}/items/no-such-item/chunks"),
                     api.post("/knowledge-bases/no-such-base/search", json={"query": "otters"})):
        assert response.status_code == 404, response.text
        assert response.json()["error"]["type"] == "NotFoundError"
    assert api.get("/no-such-route").status_code == 404
    assert api.delete(f"/knowledge-bases/{bid}").status_code == 204


def test_the_served_openapi_document_is_the_checked_in_one(api):
    served = api.get("/openapi.json").json()
    assert served == json.loads(OPENAPI_FILE.read_text(encoding="utf-8")) == build()
    assert {"/knowledge-bases", "/knowledge-bases/{base_id}", "/knowledge-bases/{base_id}/items",
            "/knowledge-items/{item_id}", "/events"} <= set(served["paths"])


def test_an_item_whose_file_name_is_not_utf8_is_served_as_valid_json(api, ws):
    """os.fsdecode gives the byte 0xff of a name a lone surrogate: every answer naming the
    item (the item, a page of items, a search hit) is still 200 and valid UTF-8 JSON."""
    import os

    folder = ws.work / "bytes"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"bad-\xff name.md"), "wb") as handle:
        handle.write(b"# Otters\nOtters hold hands while they sleep.\n")
    bid = api.post("/knowledge-bases", json={"name": "Bytes"}).json()["id"]
    added = api.post(f"/knowledge-bases/{bid}/items", json={"items": [
        {"type": "directory", "data": {"path": str(folder)}}]})
    assert added.status_code == 202, added.text
    assert wait_completed(api, added.json()["items"][0]["id"])["status"] == "completed"
    page = api.get(f"/knowledge-bases/{bid}/items", params={"group_id": "*", "limit": 100})
    assert page.status_code == 200, page.text
    page.content.decode("utf-8")  # strict: no raw invalid byte
    item = next(i for i in page.json()["items"] if i["type"] == "file")
    assert item["name"] == "bad-\udcff name.md" and item["status"] == "completed"
    one = api.get(f"/knowledge-items/{item['id']}")
    assert one.status_code == 200 and one.json()["source"] == os.fsdecode(folder) + "/bad-\udcff name.md"
    found = api.post(f"/knowledge-bases/{bid}/search", json={"query": "otters hold hands", "mode": "bm25"})
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["item_id"] == item["id"]
    chunks = api.get(f"/knowledge-bases/{bid}/items/{item['id']}/chunks")
    assert chunks.status_code == 200 and "Otters hold hands" in chunks.json()["chunks"][0]["text"]
    assert api.delete(f"/knowledge-bases/{bid}").status_code == 204


def test_the_event_stream_reports_runtime_events(api):
    with httpx.Client(base_url=str(api.base_url), timeout=60) as events_client, \
            events_client.stream("GET", "/events") as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines).startswith(":")  # the stream is open before anything happens
        bid = api.post("/knowledge-bases", json={"name": "Evented"}).json()["id"]
        note = api.post(f"/knowledge-bases/{bid}/items", json={"items": [
            {"type": "note", "data": {"content": "Events arrive as they happen."}}]}).json()["items"][0]["id"]
        seen: list[tuple[str, dict]] = []
        event = None
        for line in lines:
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event:
                data = json.loads(line.split(":", 1)[1])
                seen.append((event, data))
                if event == "ItemChanged" and data["item_id"] == note and data["status"] == "completed":
                    break
        kinds = {k for k, _ in seen}
        assert {"ItemsAdded", "ItemChanged"} <= kinds
        assert any(k == "ItemsAdded" and note in d["item_ids"] for k, d in seen)
    assert api.delete(f"/knowledge-bases/{bid}").status_code == 204


def test_a_token_is_required_beyond_loopback_and_checked_on_every_request(ws):
    refused = subprocess.run(ws.command("serve", "--host", "0.0.0.0", "--port", "0"), env=ws.env(), cwd=ws.work,
                             capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode == 1
    assert "host:" in refused.stderr and "token" in refused.stderr
    other = Workspace(ws.work / "token", ws.server_url)
    proc = ServeProcess(other, "--token", "s3cret")
    try:
        with httpx.Client(base_url=proc.url, timeout=60) as client:
            for path in ("/knowledge-bases", "/openapi.json", "/events", "/knowledge-items/x"):
                missing = client.get(path)
                assert missing.status_code == 401, path
                assert missing.json()["error"]["type"] == "Unauthorized"
            assert client.get("/knowledge-bases", headers={"Authorization": "Bearer wrong"}).status_code == 401
            good = client.get("/knowledge-bases", headers={"Authorization": "Bearer s3cret"})
            assert good.status_code == 200 and good.json()["items"] == []
    finally:
        proc.stop()


SCHEMA = schemathesis.openapi.from_dict(build()).exclude(path="/events").exclude(operation_id="addItems") \
    .exclude(operation_id="restoreBase")


@pytest.fixture
def fuzz_url(api):
    api.post("/knowledge-bases", json={"name": "Fuzz target"})
    return str(api.base_url)


@SCHEMA.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_fuzzing_from_the_openapi_document_finds_no_server_error(case, fuzz_url):
    case.call_and_validate(base_url=fuzz_url, checks=[not_a_server_error], timeout=60)

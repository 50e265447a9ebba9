"""The OpenAPI 3.1 document of `ktui serve`, built here and checked in as openapi.json.

`python -m ktui.tui.http_api.openapi > tui/http_api/openapi.json` regenerates it;
tests/integration/test_http_api.py asserts that the served document, the file
and this builder agree, so the description cannot drift from the routes.
"""

from __future__ import annotations

import json
from typing import Any

JSON = dict[str, Any]

ID = {"type": "string", "minLength": 1, "maxLength": 200}
ITEM_TYPES = ["file", "url", "note", "directory", "sitemap"]
MODES = ["default", "bm25", "hybrid"]


def ref(name: str) -> JSON:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: JSON) -> JSON:
    return {"anyOf": [schema, {"type": "null"}]}


SCHEMAS: JSON = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["type", "message", "fields"], "properties": {
            "type": {"type": "string", "description": "the facade's error name: ValidationError, NotFoundError, ..."},
            "message": {"type": "string"},
            "fields": {"type": "object", "additionalProperties": {"type": "string"},
                       "description": "each bad field and what is wrong with it"}}}}},
    "Base": {"type": "object", "required": ["id", "name", "status"], "additionalProperties": True, "properties": {
        "id": {"type": "string"}, "name": {"type": "string"}, "emoji": {"type": "string"},
        "group_id": _nullable({"type": "string"}), "status": {"enum": ["completed", "failed"]},
        "error": _nullable({"type": "string"}), "embedding_model_id": _nullable({"type": "string"}),
        "dimensions": _nullable({"type": "integer"}), "rerank_model_id": _nullable({"type": "string"}),
        "chunk_size": {"type": "integer"}, "chunk_overlap": {"type": "integer"},
        "threshold": _nullable({"type": "number"}), "document_count": _nullable({"type": "integer"}),
        "top_k": {"type": "integer"}, "search_mode": {"enum": MODES}, "hybrid_alpha": _nullable({"type": "number"}),
        "created_at": {"type": "string"}, "updated_at": {"type": "string"}, "item_count": {"type": "integer"}}},
    "Item": {"type": "object", "required": ["id", "base_id", "type", "status"], "additionalProperties": True,
             "properties": {
                 "id": {"type": "string"}, "base_id": {"type": "string"}, "group_id": _nullable({"type": "string"}),
                 "type": {"enum": ITEM_TYPES}, "name": {"type": "string"}, "source": {"type": "string"},
                 "status": {"enum": ["idle", "processing", "completed", "failed"]},
                 "phase": _nullable({"type": "string"}), "error": _nullable({"type": "string"}),
                 "data": {"type": "object"}, "created_at": {"type": "string"}, "updated_at": {"type": "string"}}},
    "Chunk": {"type": "object", "required": ["id", "item_id", "chunk_index", "text"], "properties": {
        "id": {"type": "string"}, "item_id": {"type": "string"}, "chunk_index": {"type": "integer"},
        "text": {"type": "string"}, "metadata": {"type": "object"}}},
    "SearchResult": {"type": "object", "required": ["rank", "score", "score_kind", "chunk_id", "text"],
                     "additionalProperties": True, "properties": {
                         "rank": {"type": "integer"},
                         "score": {"type": "number", "description": "the raw score of score_kind, 6 decimals"},
                         "score_kind": {"enum": ["cosine", "bm25", "rrf", "fused", "rerank", "keyword"]},
                         "relevance": {"type": "number", "minimum": 0, "maximum": 1},
                         "base_id": _nullable({"type": "string"}),
                         "item_id": _nullable({"type": "string"}), "chunk_id": {"type": "string"},
                         "source": _nullable({"type": "string"}), "text": {"type": "string"},
                         "metadata": {"type": "object"}}},
    "Search": {"type": "object", "required": ["query", "degraded", "results"], "additionalProperties": True,
               "properties": {"query": {"type": "string"}, "mode": _nullable({"type": "string"}),
                              "degraded": {"type": "boolean"}, "reason": _nullable({"type": "string"}),
                              "results": {"type": "array", "items": ref("SearchResult")}}},
    "BasePage": {"type": "object", "required": ["items", "total", "page", "limit", "pages"], "properties": {
        "items": {"type": "array", "items": ref("Base")}, "total": {"type": "integer"}, "page": {"type": "integer"},
        "limit": {"type": "integer"}, "pages": {"type": "integer"}}},
    "ItemPage": {"type": "object", "required": ["items", "total", "page", "limit", "pages"], "properties": {
        "items": {"type": "array", "items": ref("Item")}, "total": {"type": "integer"}, "page": {"type": "integer"},
        "limit": {"type": "integer"}, "pages": {"type": "integer"}}},
    "Items": {"type": "object", "required": ["base_id", "items"], "properties": {
        "base_id": {"type": "string"}, "items": {"type": "array", "items": ref("Item")}}},
    "Chunks": {"type": "object", "required": ["base_id", "item_id", "chunks"], "properties": {
        "base_id": {"type": "string"}, "item_id": {"type": "string"},
        "chunks": {"type": "array", "items": ref("Chunk")}}},
    "BaseConfig": {"type": "object", "properties": {
        "name": {"type": "string"}, "emoji": {"type": "string"}, "group_id": _nullable({"type": "string"}),
        "rerank_model_id": _nullable({"type": "string"}), "chunk_size": {"type": "integer"},
        "chunk_overlap": {"type": "integer"}, "threshold": _nullable({"type": "number"}),
        "document_count": _nullable({"type": "integer"}), "search_mode": {"enum": MODES},
        "hybrid_alpha": _nullable({"type": "number"})}},
}

ERRORS = {
    "401": {"description": "missing or wrong bearer token (only when the server has a token)",
            "content": {"application/json": {"schema": ref("Error")}}},
    "404": {"description": "no such base, item or chunk", "content": {"application/json": {"schema": ref("Error")}}},
    "409": {"description": "refused in the current state (failed base, read-only server)",
            "content": {"application/json": {"schema": ref("Error")}}},
    "422": {"description": "bad input; `fields` names each bad field",
            "content": {"application/json": {"schema": ref("Error")}}},
}


def _body(schema: JSON, required: list[str] | None = None) -> JSON:
    if required:
        schema = {**schema, "required": required}
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _ok(code: str, description: str, schema: JSON | None = None) -> JSON:
    out: JSON = {code: {"description": description}}
    if schema is not None:
        out[code]["content"] = {"application/json": {"schema": schema}}
    return {**out, **ERRORS}


def _path(*names: str) -> list[JSON]:
    return [{"name": n, "in": "path", "required": True, "schema": ID} for n in names]


PAGING = [
    {"name": "page", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1, "default": 1}},
    {"name": "limit", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
]

SEARCH_BODY = {"type": "object", "additionalProperties": False, "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 1000},
    "top_k": _nullable({"type": "integer", "minimum": 1, "maximum": 1000}),
    "mode": _nullable({"enum": MODES})}}


def build() -> JSON:
    paths: JSON = {
        "/knowledge-bases": {
            "get": {"operationId": "listBases", "summary": "A page of bases (newest first)", "parameters": PAGING,
                    "responses": _ok("200", "the page", ref("BasePage"))},
            "post": {"operationId": "createBase", "summary": "Create a base",
                     "requestBody": _body({**SCHEMAS["BaseConfig"], "properties": {
                         **SCHEMAS["BaseConfig"]["properties"], "embedding_model_id": {"type": "string"},
                         "dimensions": {"type": "integer", "minimum": 1}}}, ["name"]),
                     "responses": _ok("201", "the new base", ref("Base"))}},
        "/knowledge-bases/{base_id}": {
            "parameters": _path("base_id"),
            "get": {"operationId": "getBase", "summary": "One base", "responses": _ok("200", "the base", ref("Base"))},
            "patch": {"operationId": "updateBase", "summary": "Change a base's settings (not its model: restore)",
                      "requestBody": _body(ref("BaseConfig")), "responses": _ok("200", "the base", ref("Base"))},
            "delete": {"operationId": "deleteBase", "summary": "Delete a base, its items and its index files",
                       "responses": _ok("204", "deleted")}},
        "/knowledge-bases/{base_id}/restore": {
            "parameters": _path("base_id"),
            "post": {"operationId": "restoreBase", "summary": "A new base from this one's settings and top-level items",
                     "requestBody": _body({"type": "object", "additionalProperties": False, "properties": {
                         "embedding_model_id": {"type": "string"}, "dimensions": {"type": "integer", "minimum": 1},
                         "name": {"type": "string"}}}),
                     "responses": _ok("201", "the new base", ref("Base"))}},
        "/knowledge-bases/{base_id}/items": {
            "parameters": _path("base_id"),
            "get": {"operationId": "listItems", "summary": "A page of a base's items", "parameters": [
                {"name": "type", "in": "query", "required": False, "schema": {"enum": ITEM_TYPES}},
                {"name": "group_id", "in": "query", "required": False, "schema": {"type": "string"},
                 "description": "children of this container item; '*' for every level; omitted: top level"},
                *PAGING], "responses": _ok("200", "the page", ref("ItemPage"))},
            "post": {"operationId": "addItems", "summary": "Add items; returns once they are accepted",
                     "requestBody": _body({"type": "object", "additionalProperties": False, "properties": {
                         "items": {"type": "array", "minItems": 1, "maxItems": 100, "items": {
                             "type": "object", "required": ["type", "data"], "additionalProperties": False,
                             "properties": {"type": {"enum": ITEM_TYPES}, "data": {"type": "object"}}}}}}, ["items"]),
                     "responses": _ok("202", "accepted; indexing continues", ref("Items"))}},
        "/knowledge-bases/{base_id}/delete-items": {
            "parameters": _path("base_id"),
            "post": {"operationId": "deleteItems", "summary": "Delete items with their chunks",
                     "requestBody": _body({"type": "object", "additionalProperties": False, "properties": {
                         "item_ids": {"type": "array", "items": {"type": "string"}}}}, ["item_ids"]),
                     "responses": _ok("204", "deleted")}},
        "/knowledge-bases/{base_id}/reindex-items": {
            "parameters": _path("base_id"),
            "post": {"operationId": "reindexItems", "summary": "Read and embed items again",
                     "requestBody": _body({"type": "object", "additionalProperties": False, "properties": {
                         "item_ids": {"type": "array", "items": {"type": "string"}},
                         "force": {"type": "boolean"}}}, ["item_ids"]),
                     "responses": _ok("202", "queued", ref("Items"))}},
        "/knowledge-bases/{base_id}/search": {
            "parameters": _path("base_id"),
            "post": {"operationId": "searchBase", "summary": "Search one base",
                     "requestBody": _body(SEARCH_BODY, ["query"]), "responses": _ok("200", "results", ref("Search"))}},
        "/knowledge-bases/{base_id}/items/{item_id}/chunks": {
            "parameters": _path("base_id", "item_id"),
            "get": {"operationId": "listChunks", "summary": "The stored chunks of an item (all below a container)",
                    "responses": _ok("200", "the chunks", ref("Chunks"))}},
        "/knowledge-bases/{base_id}/items/{item_id}/chunks/{chunk_id}": {
            "parameters": _path("base_id", "item_id", "chunk_id"),
            "delete": {"operationId": "deleteChunk", "summary": "Delete one chunk",
                       "responses": _ok("204", "deleted")}},
        "/knowledge-items/{item_id}": {
            "parameters": _path("item_id"),
            "get": {"operationId": "getItem", "summary": "One item", "responses": _ok("200", "the item", ref("Item"))}},
        "/search": {
            "post": {"operationId": "searchBases", "summary": "Search several bases (default: every usable one)",
                     "requestBody": _body({"type": "object", "additionalProperties": False, "properties": {
                         **SEARCH_BODY["properties"], "bases": _nullable({"type": "array", "items": {"type": "string"}}),
                         "types": _nullable({"type": "array", "items": {"enum": ITEM_TYPES}}),
                         "source_contains": _nullable({"type": "string", "minLength": 1}),
                         "source_prefix": _nullable({"type": "string", "minLength": 1}),
                         "modified_after": _nullable({"type": "string", "minLength": 1})}}, ["query"]),
                     "responses": _ok("200", "results merged by their 0-1 relevance, each naming its base",
                                      {"type": "object", "additionalProperties": True})}},
        "/events": {
            "get": {"operationId": "events", "summary": "Runtime events as server-sent events",
                    "responses": {"200": {"description": "an endless text/event-stream; `event` is the event type",
                                          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                                  "401": ERRORS["401"]}}},
        "/status": {
            "get": {"operationId": "status", "summary": "Whether the server can write, and its queue",
                    "responses": _ok("200", "the status", {"type": "object", "additionalProperties": True})}},
        "/openapi.json": {
            "get": {"operationId": "openapi", "summary": "This document",
                    "responses": {"200": {"description": "OpenAPI 3.1",
                                          "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "ktui", "version": "1",
                 "description": "Local knowledge bases: the Data API (read/patch) and the workflow operations. "
                                "See docs/http-api.md."},
        "servers": [{"url": "http://127.0.0.1:8765"}],
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": paths,
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")

"""The Starlette application of `ktui serve`: the Data API plus the workflow operations.

Read/patch surface (the reference design's Data API; no vector side effects):
`GET /knowledge-bases`, `GET|PATCH /knowledge-bases/{id}`,
`GET /knowledge-bases/{id}/items`, `GET /knowledge-items/{id}`. Workflow beside
it: create / restore / delete a base, add / delete / reindex items, search (one
base, or several through `POST /search`), list / delete chunks; `GET /events`
streams the runtime's events (server-sent events). docs/http-api.md lists every
route; `openapi.json` next to this file describes them and is served as is.

Handlers only translate HTTP to facade calls; the facade validates (errors name
its fields) and the JSON shapes are those of `ktui --json`.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ktui.core.errors import KnowledgeError, ValidationError
from ktui.core.models import ANY_GROUP, ROOT, ItemInput
from ktui.core.service import KnowledgeService
from ktui.tui import agent_tools as ops
from ktui.tui.cli_render import base_json, chunk_json, item_json, search_json
from ktui.tui.http_api.errors import (
    error_response,
    int_param,
    json_body,
    knowledge_error_response,
    only_keys,
    str_param,
)
from ktui.tui.http_api.events import event_stream
from ktui.tui.http_api.json_response import JsonResponse

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


def openapi_document() -> dict[str, Any]:
    """The checked-in OpenAPI document (tui/http_api/openapi.json)."""
    return json.loads(resources.files("ktui.tui.http_api").joinpath("openapi.json").read_text(encoding="utf-8"))


class TokenMiddleware:
    """With a token, every request must carry `Authorization: Bearer <token>` (compared in
    constant time); without one (127.0.0.1 only) nothing is checked."""

    def __init__(self, app: ASGIApp, token: str | None):
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, given = header.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.token):
            response = error_response(401, "Unauthorized", "a valid 'Authorization: Bearer <token>' header is required")
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_app(ks: KnowledgeService, *, token: str | None = None) -> Starlette:
    async def counted(base: Any) -> dict[str, Any]:
        return base_json(base, (await ks.item_counts()).get(base.id, 0))

    # --- the Data API ------------------------------------------------------

    async def list_bases(request: Request) -> Response:
        page = await ks.list_bases(page=int_param(request, "page", 1), limit=int_param(request, "limit", 20))
        counts = await ks.item_counts()
        return JsonResponse(ops.page_json(page, lambda b: base_json(b, counts.get(b.id, 0))))

    async def get_base(request: Request) -> Response:
        return JsonResponse(await counted(await ks.get_base(request.path_params["base_id"])))

    async def patch_base(request: Request) -> Response:
        patch = await json_body(request)
        return JsonResponse(await counted(await ks.update_base(request.path_params["base_id"], patch)))

    async def list_items(request: Request) -> Response:
        group_id: Any = ROOT
        raw_group = str_param(request, "group_id")
        if raw_group == "*":
            group_id = ANY_GROUP
        elif raw_group:
            group_id = raw_group
        page = await ks.list_items(request.path_params["base_id"], type=str_param(request, "type"), group_id=group_id,
                                   page=int_param(request, "page", 1), limit=int_param(request, "limit", 20))
        return JsonResponse(ops.page_json(page, item_json))

    async def get_item(request: Request) -> Response:
        return JsonResponse(item_json(await ks.get_item(request.path_params["item_id"])))

    # --- workflow ----------------------------------------------------------

    async def create_base(request: Request) -> Response:
        body = await json_body(request)
        if "name" not in body:
            raise ValidationError.field("name", "is required")
        name = body.pop("name")
        model, dims = body.pop("embedding_model_id", None), body.pop("dimensions", None)
        return JsonResponse(await counted(await ks.create_base(name, model, dims, **body)), status_code=201)

    async def restore_base(request: Request) -> Response:
        body = await json_body(request)
        only_keys(body, {"embedding_model_id", "dimensions", "name"})
        model = body.get("embedding_model_id") or ks.settings.default_embedding_model
        dims = body.get("dimensions")
        if dims is None:
            dims = await ks.detect_dimensions(model)
        base = await ks.restore_base(request.path_params["base_id"], model, dims, body.get("name"))
        return JsonResponse(await counted(base), status_code=201)

    async def delete_base(request: Request) -> Response:
        await ks.delete_base(request.path_params["base_id"])
        return Response(status_code=204)

    async def add_items(request: Request) -> Response:
        body = await json_body(request)
        only_keys(body, {"items"})
        specs = body.get("items")
        if not isinstance(specs, list) or not specs:
            raise ValidationError.field("items", "must be a non-empty list of {type, data} objects")
        inputs = []
        for n, spec in enumerate(specs):
            if not isinstance(spec, dict) or set(spec) - {"type", "data"} or "type" not in spec:
                raise ValidationError.field(f"items[{n}]", "must be an object {\"type\": ..., \"data\": {...}}")
            inputs.append(ItemInput(spec["type"], spec.get("data", {})))
        items = await ks.add_items(request.path_params["base_id"], inputs)
        return JsonResponse({"base_id": request.path_params["base_id"], "items": [item_json(i) for i in items]},
                            status_code=202)

    async def delete_items(request: Request) -> Response:
        body = await json_body(request)
        only_keys(body, {"item_ids"})
        await ks.delete_items(request.path_params["base_id"], body.get("item_ids"))
        return Response(status_code=204)

    async def reindex_items(request: Request) -> Response:
        body = await json_body(request)
        only_keys(body, {"item_ids", "force"})
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise ValidationError.field("force", "must be true or false")
        items = await ks.reindex_items(request.path_params["base_id"], body.get("item_ids"), force=force)
        return JsonResponse({"base_id": request.path_params["base_id"], "items": [item_json(i) for i in items]},
                            status_code=202)

    async def search_base(request: Request) -> Response:
        body = await json_body(request)
        only_keys(body, {"query", "top_k", "mode"})
        response = await ks.search(request.path_params["base_id"], body.get("query"), body.get("top_k"),
                                   mode=body.get("mode"))
        base = await ks.get_base(request.path_params["base_id"])
        mode = body.get("mode") or str(getattr(base.search_mode, "value", base.search_mode))
        return JsonResponse(search_json(str(body.get("query")), mode, response))

    async def search_many(request: Request) -> Response:
        body = await json_body(request)
        only_keys(body, {"query", "bases", "top_k", "mode", "types", "source_contains", "source_prefix",
                         "modified_after"})
        return JsonResponse(await ops.search(ks, body.get("query"), body.get("bases"), mode=body.get("mode"),
                                             top_k=body.get("top_k"), types=body.get("types"),
                                             source_contains=body.get("source_contains"),
                                             source_prefix=body.get("source_prefix"),
                                             modified_after=body.get("modified_after")))

    async def list_chunks(request: Request) -> Response:
        p = request.path_params
        chunks = await ks.list_item_chunks(p["base_id"], p["item_id"])
        return JsonResponse({"base_id": p["base_id"], "item_id": p["item_id"],
                             "chunks": [chunk_json(c) for c in chunks]})

    async def delete_chunk(request: Request) -> Response:
        p = request.path_params
        await ks.delete_item_chunk(p["base_id"], p["item_id"], p["chunk_id"])
        return Response(status_code=204)

    async def events(request: Request) -> Response:
        return event_stream(ks, request)

    async def openapi(request: Request) -> Response:
        return JsonResponse(openapi_document())

    async def status(request: Request) -> Response:
        stats = ks.queue_stats()
        return JsonResponse({"read_only": ks.read_only, "queue": {
            "pending": stats.pending, "running": stats.running, "done": stats.done, "failed": stats.failed,
            "chunks_per_second": stats.chunks_per_second}})

    def guarded(handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except KnowledgeError as exc:
                return knowledge_error_response(exc)
        run.__name__ = handler.__name__
        return run

    routes = [
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/status", guarded(status), methods=["GET"]),
        Route("/events", events, methods=["GET"]),
        Route("/search", guarded(search_many), methods=["POST"]),
        Route("/knowledge-bases", guarded(list_bases), methods=["GET"]),
        Route("/knowledge-bases", guarded(create_base), methods=["POST"]),
        Route("/knowledge-bases/{base_id}", guarded(get_base), methods=["GET"]),
        Route("/knowledge-bases/{base_id}", guarded(patch_base), methods=["PATCH"]),
        Route("/knowledge-bases/{base_id}", guarded(delete_base), methods=["DELETE"]),
        Route("/knowledge-bases/{base_id}/restore", guarded(restore_base), methods=["POST"]),
        Route("/knowledge-bases/{base_id}/items", guarded(list_items), methods=["GET"]),
        Route("/knowledge-bases/{base_id}/items", guarded(add_items), methods=["POST"]),
        Route("/knowledge-bases/{base_id}/delete-items", guarded(delete_items), methods=["POST"]),
        Route("/knowledge-bases/{base_id}/reindex-items", guarded(reindex_items), methods=["POST"]),
        Route("/knowledge-bases/{base_id}/search", guarded(search_base), methods=["POST"]),
        Route("/knowledge-bases/{base_id}/items/{item_id}/chunks", guarded(list_chunks), methods=["GET"]),
        Route("/knowledge-bases/{base_id}/items/{item_id}/chunks/{chunk_id}", guarded(delete_chunk),
              methods=["DELETE"]),
        Route("/knowledge-items/{item_id}", guarded(get_item), methods=["GET"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error_response(exc.status_code, "HTTPError", str(exc.detail))

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("request %s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(500, "InternalError", f"{type(exc).__name__}: {exc}")

    return Starlette(
        routes=routes,
        middleware=[Middleware(TokenMiddleware, token=token)],
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )

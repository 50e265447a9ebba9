"""How `ktui serve` reports failures, and how it reads request input.

Every failure is JSON: `{"error": {"type", "message", "fields"}}`, where `type`
is the facade's exception name (`ValidationError`, `NotFoundError`, ...) and
`fields` maps each bad field to what is wrong with it (as the facade names it).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.requests import Request

from ktui.core.errors import (
    AggregateAcceptanceError,
    ConfigError,
    InvalidOperationError,
    KnowledgeError,
    NotFoundError,
    PartialDeletionError,
    ProviderError,
    SchemaVersionError,
    StoreError,
    ValidationError,
)
from ktui.tui.http_api.json_response import JsonResponse

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024  # a note is at most 1,000,000 characters; 100 of them do not fit anyway


def status_of(exc: KnowledgeError) -> int:
    if isinstance(exc, ValidationError | AggregateAcceptanceError):
        return 422
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, InvalidOperationError | PartialDeletionError):
        return 409  # refused in the current state (a failed base, a read-only server, ...)
    if isinstance(exc, ProviderError):
        return 502  # the embedding / rerank server failed
    if isinstance(exc, StoreError | ConfigError | SchemaVersionError):
        return 500
    return 400


def error_response(status: int, kind: str, message: str, fields: dict[str, str] | None = None) -> JsonResponse:
    return JsonResponse({"error": {"type": kind, "message": message, "fields": fields or {}}}, status_code=status)


def knowledge_error_response(exc: KnowledgeError) -> JsonResponse:
    fields: dict[str, str] = {}
    if isinstance(exc, ValidationError):
        fields = dict(getattr(exc, "errors", {}) or {})
    elif isinstance(exc, AggregateAcceptanceError):
        fields = dict(getattr(exc, "failures", {}) or {})
    return error_response(status_of(exc), type(exc).__name__, " ".join(str(exc).split()), fields)


async def json_body(request: Request, *, required: bool = True) -> dict[str, Any]:
    """The request's JSON object; anything else is a ValidationError on `body`."""
    raw = await request.body()
    if not raw:
        if required:
            raise ValidationError.field("body", "a JSON object is required")
        return {}
    if len(raw) > MAX_BODY_BYTES:
        raise ValidationError.field("body", f"is larger than {MAX_BODY_BYTES} bytes")
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError.field("body", f"is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValidationError.field("body", "must be a JSON object")
    return value


def int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationError.field(name, f"must be an integer, got {raw!r}") from None


def str_param(request: Request, name: str) -> str | None:
    return request.query_params.get(name)


def only_keys(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValidationError.field(unknown[0], f"is not a field of this request (fields: {', '.join(sorted(allowed))})")

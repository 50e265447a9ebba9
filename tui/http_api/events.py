"""`GET /events`: the runtime's events as server-sent events (sse-starlette).

One SSE message per event: `event:` is the event's type (`ItemChanged`,
`ItemsAdded`, `ItemsRemoved`, `BaseChanged`, `BaseRemoved`, `QueueStats`, `Resync`), `data:`
its fields as JSON. The subscription coalesces per item (latest state wins), so
a slow client never holds the runtime back; it is closed when the client goes.
A reader (`ktui serve` beside another holder) has no runtime and sends only
keep-alive pings.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from ktui.core.service import KnowledgeService
from ktui.tui.http_api.json_response import json_text

PING_SECONDS = 15
BATCH_WAIT_SECONDS = 1.0


def event_json(event: Any) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def event_stream(ks: KnowledgeService, request: Request) -> EventSourceResponse:
    subscription = ks.subscribe()

    async def messages() -> AsyncIterator[ServerSentEvent]:
        try:
            yield ServerSentEvent(comment="ktui events")  # headers go out at once
            while not subscription.closed and not await request.is_disconnected():
                for event in await subscription.next_batch(timeout=BATCH_WAIT_SECONDS):
                    yield ServerSentEvent(data=json_text(event_json(event)),
                                          event=type(event).__name__)
        finally:
            subscription.close()

    return EventSourceResponse(messages(), ping=PING_SECONDS)

"""`ktui mcp [--allow-writes]`: the bases as a Model Context Protocol server over stdio.

Built on the official `mcp` SDK (`MCPServer`): each tool has a JSON schema for
its arguments (from the annotations below) and a structured result (the same
shapes as `ktui --json`). A failure is an MCP tool error (`is_error`) whose
text says what was wrong and which argument; the server keeps running.

Without `--allow-writes` the server is a reader (`KnowledgeService.open(
read_only=True)`): it never takes the data directory, so it runs beside the
TUI or `ktui serve`, sees what they commit, and never writes. With it, the
server holds the directory (like the TUI) and offers `add_items` and `reindex`
as well; it then recovers unfinished work once, when it starts.

stdout carries the protocol: nothing else may print there (logs go to stderr).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from ktui.core import Settings
from ktui.core.errors import KnowledgeError
from ktui.core.service import KnowledgeService
from ktui.tui import agent_tools as ops

log = logging.getLogger(__name__)

T = TypeVar("T")
JSON = dict[str, Any]

INSTRUCTIONS = (
    "Local knowledge bases indexed by ktui. Use list_bases to see them, search to find passages "
    "(results carry base, item and chunk ids), read_chunk to read a passage with its neighbours, "
    "list_items / get_item to browse. When a search result says degraded, its results are keyword "
    "(bm25) matches only, because the query could not be embedded."
)

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)

BaseRef = Annotated[str, Field(description="A knowledge base id or its (unique) name", min_length=1)]
ItemId = Annotated[str, Field(description="An item id (search results and list_items give them)", min_length=1)]
Mode = Literal["default", "bm25", "hybrid"]
ItemType = Literal["file", "url", "note", "directory", "sitemap"]


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(value: T) -> T:
    """`value` with every lone surrogate (a non-UTF-8 file name, through os.fsdecode) as
    U+FFFD. The SDK serialises results with pydantic, which cannot write a surrogate at all
    and failed the whole call; ids stay exact, so a follow-up call still finds the item."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {utf8_safe(k): utf8_safe(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [utf8_safe(v) for v in value]  # type: ignore[return-value]
    return value


def _needs_cleaning(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def tool_errors(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A user mistake or refusal becomes a tool error with the service's message; a bug
    becomes one too (logged with its traceback on stderr), never a dead server. A result
    is made writable as UTF-8 first (`utf8_safe`)."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            result = await fn(*args, **kwargs)
            return utf8_safe(result) if _needs_cleaning(result) else result
        except KnowledgeError as exc:
            raise ToolError(" ".join(str(exc).split()) or type(exc).__name__) from None
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server must outlive any one call
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(f"internal error: {type(exc).__name__}: {exc}") from None

    return wrapper


def build_server(ks: KnowledgeService, *, allow_writes: bool) -> MCPServer:
    """The MCP server over an open facade (tests drive it through a real stdio client)."""
    server = MCPServer(name="ktui", instructions=INSTRUCTIONS)

    @server.tool(annotations=READ)
    @tool_errors
    async def list_bases() -> JSON:
        """Every knowledge base with its settings, status and item count."""
        return await ops.list_bases(ks)

    @server.tool(annotations=READ)
    @tool_errors
    async def search(
        query: Annotated[str, Field(description="What to look for (1-1000 characters, with a letter or digit)")],
        bases: Annotated[list[str] | None, Field(description="Base ids or names; omit to search every usable base")] = None,
        mode: Annotated[Mode | None, Field(description="default = vector, bm25 = keywords, hybrid = both; omit for each base's own")] = None,
        top_k: Annotated[int | None, Field(description="Number of results (default: the base's top-K, 10 for several bases)", ge=1, le=1000)] = None,
        types: Annotated[list[ItemType] | None, Field(description="Keep only results from items of these types (or read from a folder/sitemap of that type)")] = None,
        source_contains: Annotated[str | None, Field(description="Keep only results whose source path or URL contains this text")] = None,
        source_prefix: Annotated[str | None, Field(description="Keep only results whose source (absolute path or URL) starts with this", min_length=1)] = None,
        modified_after: Annotated[str | None, Field(description="Keep only items added or reindexed at or after this ISO-8601 date/time")] = None,
    ) -> JSON:
        """Search knowledge bases. Each result has its text, source, heading, relevance (0-1, comparable
        across bases and modes: results of several bases are merged by it), score (score_kind says
        what it measures), base, item and chunk ids. `degraded: true` means keyword-only results."""
        return await ops.search(ks, query, bases, mode=mode, top_k=top_k, types=types,
                                source_contains=source_contains, source_prefix=source_prefix,
                                modified_after=modified_after)

    @server.tool(annotations=READ)
    @tool_errors
    async def list_items(
        base: BaseRef,
        parent_id: Annotated[str | None, Field(description="List the children of this directory/sitemap item; omit for top-level items")] = None,
        type: Annotated[ItemType | None, Field(description="Only items of this type")] = None,
        all_levels: Annotated[bool, Field(description="Items at every level instead of one")] = False,
        page: Annotated[int, Field(description="Page number, from 1", ge=1)] = 1,
        limit: Annotated[int, Field(description="Items per page", ge=1, le=100)] = 50,
    ) -> JSON:
        """A page of a base's items (files, urls, notes, directories, sitemaps) with their status."""
        return await ops.list_items(ks, base, parent_id=parent_id, type=type, everything=all_levels,
                                    page=page, limit=limit)

    @server.tool(annotations=READ)
    @tool_errors
    async def get_item(item_id: ItemId) -> JSON:
        """One item: type, source, status (and error), its stored payload."""
        return await ops.get_item(ks, item_id)

    @server.tool(annotations=READ)
    @tool_errors
    async def read_chunk(
        base: BaseRef,
        item_id: ItemId,
        chunk_id: Annotated[str, Field(description="The chunk id of a search result", min_length=1)],
        neighbours: Annotated[int, Field(description="Chunks to include before and after it", ge=0, le=20)] = 1,
    ) -> JSON:
        """A chunk of an item with its neighbouring chunks, to read a search hit in context."""
        return await ops.read_chunk(ks, base, item_id, chunk_id, neighbours)

    if allow_writes:

        @server.tool(annotations=WRITE)
        @tool_errors
        async def add_items(
            base: BaseRef,
            items: Annotated[list[dict[str, Any]], Field(description=(
                "Items to add, at most 100: {\"type\": \"note\", \"content\": TEXT, \"source_url\"?: URL}, "
                "{\"type\": \"url\", \"url\": URL}, {\"type\": \"file\", \"path\": ABSOLUTE_PATH}, "
                "{\"type\": \"directory\", \"path\": ABSOLUTE_PATH, \"watch\"?: BOOL}"), min_length=1, max_length=100)],
        ) -> JSON:
            """Add notes, web pages, files or folders to a base. Returns once they are accepted;
            indexing continues in the background (see get_item for each item's status)."""
            return await ops.add_items(ks, base, items)

        @server.tool(annotations=WRITE)
        @tool_errors
        async def reindex(
            base: BaseRef,
            item_ids: Annotated[list[str], Field(description="Items to read and embed again", min_length=1)],
            force: Annotated[bool, Field(description="Rebuild folders from scratch instead of refreshing what changed")] = False,
        ) -> JSON:
            """Read and embed items again (folders and sitemaps are expanded afresh)."""
            return await ops.reindex(ks, base, item_ids, force=force)

    @server.resource("ktui://bases", name="bases", mime_type="application/json",
                     description="Every knowledge base (the list_bases result)")
    async def bases_resource() -> str:
        return json.dumps(await ops.list_bases(ks), ensure_ascii=False)

    @server.resource("ktui://bases/{base_id}", name="base", mime_type="application/json",
                     description="One knowledge base's settings and item count")
    async def base_resource(base_id: str) -> str:
        try:
            return json.dumps(await ops.get_base(ks, base_id), ensure_ascii=False)
        except KnowledgeError as exc:
            raise ValueError(str(exc)) from None

    return server


async def serve_stdio(settings: Settings, *, allow_writes: bool) -> int:
    if allow_writes:
        ks = await KnowledgeService.open(settings=settings, recover=True, command="ktui mcp --allow-writes")
    else:
        ks = await KnowledgeService.open(settings=settings, read_only=True)
    try:
        await build_server(ks, allow_writes=allow_writes).run_stdio_async()
    finally:
        await ks.close()
    return 0


def main(settings: Settings, *, allow_writes: bool) -> int:
    import asyncio

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="ktui mcp: %(levelname)s %(message)s")
    return asyncio.run(serve_stdio(settings, allow_writes=allow_writes))

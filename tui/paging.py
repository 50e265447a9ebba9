"""Every page of a facade listing, for the front ends that need all of it (CLI, MCP, HTTP, TUI)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktui.core.models import KnowledgeBase

if TYPE_CHECKING:
    from ktui.core.service import KnowledgeService


async def all_bases(ks: KnowledgeService) -> list[KnowledgeBase]:
    """Every base, in the facade's order (pages of 100)."""
    out: list[KnowledgeBase] = []
    page = 1
    while True:
        listing = await ks.list_bases(page=page, limit=100)
        out.extend(listing.items)
        if page >= listing.pages:
            return out
        page += 1

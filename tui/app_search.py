"""The search pane's workflow: run a search in a worker, show its answer, open a result.

The query is parsed by tui/search_query.py (scope `in:` and filters); a newer search
replaces an older one (a serial number), and an answer for another base is dropped.
`SearchFlow` is a mixin of `KtuiApp` (tui/app.py), which routes the pane's events here.
"""

from __future__ import annotations

import asyncio

from rich.text import Text

from ktui.core.errors import KnowledgeError, StoreDamagedError
from ktui.core.models import ItemType
from ktui.tui.messages import SearchFinished, StoreDamaged
from ktui.tui.screens.chunks import ChunkContextScreen
from ktui.tui.screens.common import error_text
from ktui.tui.search_query import parse_query
from ktui.tui.text import clean, shorten
from ktui.tui.widgets.search_pane import short_source


class SearchFlow:
    """Searching from the search pane (see the module docstring)."""

    _search_serial: int

    def start_search(self) -> None:
        base = self.current_base
        pane = self.search_pane
        raw = pane.query_text
        parsed = parse_query(raw)  # scope (in:) and filters (type: under: after:), see tui/search_query.py
        if (base is None and not parsed.several) or not raw.strip():
            return
        if parsed.problems or not parsed.text:
            why = "; ".join(parsed.problems) or "type words to search for besides in:, type:, under: and after:"
            pane.show_failure(raw.strip(), why)
            return
        self._search_serial += 1
        serial, mode, top_k = self._search_serial, pane.mode, pane.top_k
        base_id = base.id if base is not None else ""
        pane.show_status(_status(f"Searching “{shorten(raw.strip(), 200)}”…"))

        async def search() -> None:
            loop = asyncio.get_running_loop()
            started = loop.time()
            names: dict[str, str] = {}
            try:
                if parsed.several:
                    chosen = None if parsed.every_base else [await self.ks.resolve_base(ref) for ref in parsed.bases]
                    ids = None if chosen is None else list(dict.fromkeys(b.id for b in chosen))
                    names = {b.id: b.name for b in chosen or ()}
                    response = await self.ks.search_bases(ids, parsed.text, top_k, mode=mode, filters=parsed.filters())
                    for found in dict.fromkeys(r.base_id for r in response.results if r.base_id):
                        if found not in names:
                            names[found] = (await self.ks.get_base(found)).name
                else:
                    response = await self.ks.search(base_id, parsed.text, top_k, mode=mode, filters=parsed.filters())
            except KnowledgeError as exc:
                if isinstance(exc, StoreDamagedError):
                    self.post_message(StoreDamaged(base_id))
                self.post_message(SearchFinished(base_id, raw.strip(), mode, None, serial, error=error_text(exc)))
                return
            self.post_message(SearchFinished(base_id, raw.strip(), mode, response, serial,
                                             (loop.time() - started) * 1000, base_names=names,
                                             scope=parsed.describe(), terms_query=parsed.text))

        self.run_worker(search(), group="search", exclusive=True, exit_on_error=False)

    def on_search_finished(self, message: SearchFinished) -> None:
        if not self._alive():
            return
        if message.serial != self._search_serial or message.base_id != (self.item_tree.base_id or ""):
            return  # a newer search (or another base) replaced this one
        if message.response is None:
            # shown where it happened, in full (a query without a letter or digit is a common case)
            self.search_pane.show_failure(message.query, message.error or "the search failed")
            return
        self.search_pane.show_response(message.query, message.response, message.mode, self._root_folders(),
                                       base_names=message.base_names, scope=message.scope,
                                       terms_query=message.terms_query)

    def _root_folders(self) -> list[str]:
        """Sources of the base's top-level folders: result paths are shown relative to them."""
        return [n.data.item.source for n in self.item_tree.root.children
                if n.data is not None and n.data.item.type == ItemType.DIRECTORY]

    def open_result(self) -> None:
        """Open the selected result in its context (the chunk among its neighbours)."""
        result = self.search_pane.selected_result
        base = self.current_base
        base_id = result.base_id if result is not None and result.base_id else (base.id if base else None)
        if result is None or base_id is None or result.item_id is None:
            return
        self.push_screen(ChunkContextScreen(base_id, result.item_id, result.chunk_id,
                                            self.search_pane.query_text,
                                            short_source(result.metadata, self._root_folders())))


def _status(text: str, style: str = "dim") -> Text:
    return Text(clean(text, one_line=True), style)

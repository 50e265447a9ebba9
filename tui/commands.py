"""The command palette's provider: every action of tui.keymap that makes sense right now."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ktui.tui.keymap import APP_ACTIONS, display_key, key_of
from ktui.tui.text import literal


class KtuiCommands(Provider):
    """Command palette: every action of tui.keymap that makes sense right now.

    Context-aware: an action whose `check_action` says "not now" (no base
    selected, no item under the cursor, a failed base) is not offered.
    """

    def _available(self):
        app = self.app
        keymap = getattr(app, "keymap_overrides", {})
        for action in APP_ACTIONS:
            if not action.palette:
                continue
            if app.check_action(action.action, ()) is not True:
                continue
            yield action, literal(f"{action.help}  · key {display_key(key_of(action, keymap))}")

    async def discover(self) -> Hits:
        for action, help_text in self._available():
            yield DiscoveryHit(literal(action.description), partial(self.app.run_action, action.action),
                               help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action, help_text in self._available():
            score = max(matcher.match(action.description), 0.5 * matcher.match(action.help))
            # `highlight` returns Content built from the literal description
            if score > 0:
                yield Hit(score, matcher.highlight(action.description),
                          partial(self.app.run_action, action.action), help=help_text)

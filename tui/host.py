"""What widgets and dialogs need from the app, without importing the app.

`ItemTree`, the dialogs and the detail views reach the service and the user's
keymap through this protocol, so `ktui.tui.app` imports them and none of them
imports `ktui.tui.app` (no import circle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

from ktui.tui.keymap import key_for

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from ktui.core.service import KnowledgeService


class ServiceHost(Protocol):
    keymap_overrides: dict[str, str]

    @property
    def ks(self) -> KnowledgeService: ...


def host_of(node: DOMNode) -> ServiceHost:
    return cast(ServiceHost, node.app)


def key_hint(node: DOMNode, binding_id: str) -> str:
    """The key bound to `binding_id` right now (after the user's keymap), for hints in the UI."""
    keymap = getattr(node.app, "keymap_overrides", {})
    return key_for(binding_id, keymap)

"""ktui's Textual application: bases, item tree and search panes over KnowledgeService.

Architecture (after harlequin, posting and toolong):

* The app talks to core only through `KnowledgeService` (plus core.models,
  core.errors, core.engine). Every service call runs in a worker; workers only
  post messages (tui.messages); handlers on the message loop own widget state.
* One worker reads `ks.subscribe()`: it takes whatever the subscription has
  coalesced (latest state per item wins), posts it as ONE `ServiceEvents`
  message and sleeps 1/15 s, so the screen is updated at most ~15 times a
  second however fast the runtime works, and each update is a single
  `batch_update()`.
* Every action has a binding id (tui.keymap) — footer, help screen, command
  palette and the user's `[keymap]` all come from that one table.
* A `KnowledgeError` from the service becomes a toast and a notice on the base
  or item it concerns; it never takes the app down.

`KtuiApp` is put together from one module per job: this one (layout, lifecycle,
service calls and their outcomes, which keys work now, the theme), `app_sync.py`
(the event pump and the bases list), `app_actions.py` (the actions on bases and
items), `app_search.py` (the search workflow) and `commands.py` (the palette).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.widgets import Input, Label, OptionList, Select

from ktui.core import Settings
from ktui.core.errors import KnowledgeError, StoreDamagedError
from ktui.core.models import (
    ItemType,
    KnowledgeBase,
)
from ktui.core.service import KnowledgeService
from ktui.tui.app_actions import BaseAndItemActions
from ktui.tui.app_search import SearchFlow
from ktui.tui.app_sync import PaneSync
from ktui.tui.commands import KtuiCommands
from ktui.tui.demo_base import ensure_demo
from ktui.tui.keymap import APP_ACTIONS, bindings, key_for, unknown_ids
from ktui.tui.messages import (
    BaseDeleted,
    BaseReindexed,
    DemoReady,
    Outcome,
    ReindexQueued,
    ServiceFailed,
    StoreDamaged,
    WatchSet,
)
from ktui.tui.screens.common import Dialog, error_text
from ktui.tui.screens.help import HelpScreen
from ktui.tui.settings_file import save_top_level
from ktui.tui.text import clean, literal, shorten
from ktui.tui.typeahead import KeyTypeahead
from ktui.tui.widgets.bases_pane import BasesPane
from ktui.tui.widgets.item_tree import ItemTree
from ktui.tui.widgets.key_footer import KeyFooter
from ktui.tui.widgets.search_pane import SearchPane
from ktui.tui.widgets.status_line import StatusLine

REFRESH_HZ = 15
TOAST_LIMIT = 2000  # characters of a toast (the details views show whole errors)
PANES = {"bases": "#bases", "items": "#items", "results": "#results", "query": "#query"}


_ACTION_NAMES = {a.action.split("(")[0] for a in APP_ACTIONS}
_PANE_ACTIONS = _ACTION_NAMES - {"help", "quit", "change_theme"}


class KtuiApp(KeyTypeahead, PaneSync, BaseAndItemActions, SearchFlow, App[int]):
    TITLE = "ktui"
    CSS_PATH = "ktui.tcss"
    BINDINGS = bindings()
    COMMANDS = App.COMMANDS | {KtuiCommands}
    # narrow terminals give the bases pane less room, wide ones give the search pane more;
    # short ones drop the result preview (Enter still opens a hit in its context)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-normal"), (180, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    def __init__(
        self,
        settings: Settings,
        *,
        service: KnowledgeService | None = None,
        demo: bool = False,
        start_dir: Path | None = None,
        refresh_hz: float = REFRESH_HZ,
        settings_file: Path | None = None,
        stop_on_signals: bool = False,
    ) -> None:
        """`settings_file`: where a theme the user picks is saved (None: not saved, e.g. in tests).
        `stop_on_signals`: SIGTERM and SIGHUP quit the app like `q` does (set by the real
        launcher only: in tests the process's signals belong to pytest)."""
        super().__init__()
        self._init_typeahead()  # keys typed while a dialog opens wait for it (tui/typeahead.py)
        self.stop_on_signals = stop_on_signals
        self.stopped_by_signal: str | None = None
        self.settings_file = settings_file
        self.settings = settings
        self._service = service
        self._owns_service = service is None
        self.demo = demo
        self.start_dir = start_dir or Path.cwd()
        self.refresh_interval = 1.0 / refresh_hz
        self.keymap_overrides: dict[str, str] = dict(settings.keymap)
        self.batches_applied = 0  # for tests and the benchmark: how many batched updates ran
        self._search_serial = 0
        self._select_after_load: str | None = None
        self._bases_dirty = False
        self._bases_loading = False
        self._subscription = None
        self.groups: dict[str, str] = {}  # group id -> name, for the edit dialog
        self.last_add_tab = "file"
        self._theme_restored = False

    # --- every toast goes through here: its text is data, never markup ----------

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Toasts show user text (names, errors) literally: markup is off, escapes are cleaned."""
        super().notify(clean(shorten(str(message), TOAST_LIMIT)), title=clean(str(title), one_line=True),
                       severity=severity, timeout=timeout, markup=False)

    # --- service ------------------------------------------------------------

    @property
    def ks(self) -> KnowledgeService:
        if self._service is None:
            raise RuntimeError("the knowledge service is not open yet")
        return self._service

    @property
    def ready(self) -> bool:
        return self._service is not None

    # --- layout ---------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="panes"):
            with Vertical(id="bases-box", classes="pane"):
                yield Label(literal("Bases"), classes="pane-title")
                yield BasesPane(id="bases")
            with Vertical(id="items-box", classes="pane"):
                yield Label(literal("Items"), classes="pane-title", id="items-title")
                yield ItemTree(id="items")
            with Vertical(id="search-box", classes="pane"):
                yield Label(literal("Search"), classes="pane-title")
                yield SearchPane(id="search")
        yield StatusLine(id="status")
        yield KeyFooter()

    def _alive(self) -> bool:
        """False while the app shuts down (its widgets are already gone, late messages are dropped).
        Both the tree and the status line: at shutdown they are removed one after the other."""
        try:
            self.query_one(ItemTree)
            self.query_one(StatusLine)
        except NoMatches:
            return False
        return True

    @property
    def bases_pane(self) -> BasesPane:
        return self.query_one(BasesPane)

    def get_driver_class(self) -> type[Driver]:
        """Textual's terminal driver, or on Linux/macOS `KtuiDriver`: it survives the terminal
        going away (tui/terminal_driver.py). Tests run headless and never get here."""
        driver_class = super().get_driver_class()
        if sys.platform != "win32":
            from textual.drivers.linux_driver import LinuxDriver

            if driver_class is LinuxDriver:
                from ktui.tui.terminal_driver import KtuiDriver

                return KtuiDriver
        return driver_class

    @property
    def item_tree(self) -> ItemTree:
        return self.query_one(ItemTree)

    @property
    def search_pane(self) -> SearchPane:
        return self.query_one(SearchPane)

    async def on_mount(self) -> None:
        if self.stop_on_signals:
            self._stop_on_signals()
        if self.settings.theme:
            if self.settings.theme in self.available_themes:
                self.theme = self.settings.theme
            else:
                self.notify(f"Unknown theme '{self.settings.theme}' in the settings file", severity="warning")
        self._theme_restored = True
        if self.keymap_overrides:
            self.set_keymap(self.keymap_overrides)
            unknown = unknown_ids(self.keymap_overrides)
            if unknown:
                self.notify("Unknown binding id(s) in [keymap]: " + ", ".join(unknown), severity="warning")
        if self._service is None:
            try:
                self._service = await KnowledgeService.open(settings=self.settings)
            except KnowledgeError as exc:
                self.exit(1, return_code=1, message=Text("ktui: " + clean(str(exc))))
                return
        self._subscription = self.ks.subscribe()
        self.run_worker(self._pump_events(), name="events", group="events", exit_on_error=False)
        self.query_one(StatusLine).update_stats(self.ks.queue_stats())
        self.bases_pane.focus()
        if self.demo:
            self.call_service("Preparing the demo", ensure_demo(self.ks, Path(self.settings.data_dir)), DemoReady)
        else:
            self.reload_bases()

    def _stop_on_signals(self) -> None:
        """SIGTERM (`kill`, systemd, a closing multiplexer) and SIGHUP (the terminal went
        away) leave through the same path as `q`: the terminal is restored, the
        facade closes, unfinished items resume at the next start. By default they
        would end the process in raw mode on the alternate screen."""
        import signal

        loop = asyncio.get_running_loop()
        for sig, code in ((signal.SIGTERM, 143), (signal.SIGHUP, 129)):
            try:
                loop.add_signal_handler(sig, self._stop_by_signal, sig.name, code)
            except (NotImplementedError, RuntimeError):  # not on this platform
                return

    def _stop_by_signal(self, name: str, code: int) -> None:
        self.stopped_by_signal = name
        self.exit(return_code=code)

    async def on_unmount(self) -> None:
        if self._subscription is not None:
            self._subscription.close()
        if self._owns_service and self._service is not None:
            service, self._service = self._service, None
            await service.close()

    @on(OptionList.OptionHighlighted, "#bases")
    def _base_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._sync_selection()

    @property
    def current_base(self) -> KnowledgeBase | None:
        return self.bases_pane.current_base

    # --- service calls ----------------------------------------------------------

    def call_service(
        self,
        what: str,
        coro: Awaitable[Any],
        outcome: type[Outcome] | None = None,
        *,
        base_id: str | None = None,
        item_id: str | None = None,
        **fields: Any,
    ) -> None:
        """Await `coro` in a worker; a failure becomes `ServiceFailed` (a toast and a notice on the
        base or item), success posts `outcome(value=…, **fields)`."""

        async def call() -> None:
            try:
                value = await coro
            except KnowledgeError as exc:
                if isinstance(exc, StoreDamagedError):
                    self.post_message(StoreDamaged(base_id))
                self.post_message(ServiceFailed(what, error_text(exc), base_id=base_id, item_id=item_id))
            else:
                if outcome is not None:
                    self.post_message(outcome(value=value, **fields))

        self.run_worker(call(), group="calls", exit_on_error=False)

    def on_demo_ready(self, message: DemoReady) -> None:
        if self._alive():
            self._select_base(message.value)

    def on_base_deleted(self, message: BaseDeleted) -> None:
        self.notify(f"Deleted base “{message.name}”", timeout=3)

    def on_reindex_queued(self, message: ReindexQueued) -> None:
        self.notify(f"Reindexing “{message.name}”", timeout=2)

    def on_base_reindexed(self, message: BaseReindexed) -> None:
        self.notify(f"Reindexing all {message.value or 0} item(s) of “{message.name}”", timeout=3)
        self.reload_bases()  # a rebuilt store no longer needs a rebuild

    def on_store_damaged(self, message: StoreDamaged) -> None:
        # the facade finds a damaged store when it first opens it (a search, the chunks); the
        # base's `store_problem` says so from then on: show it in the bases pane
        self.reload_bases()

    def on_watch_set(self, message: WatchSet) -> None:
        if not self._alive():
            return
        watch = bool(getattr(message.value.data, "watch", message.watch)) if message.value else message.watch
        self.item_tree.set_watch(message.folder_id, watch)
        self.notify(f"{'Watching' if watch else 'Stopped watching'} “{message.name}”", timeout=3)

    def on_service_failed(self, message: ServiceFailed) -> None:
        if not self._alive():
            return
        self.notify(message.error, title=message.what, severity="error", timeout=8)
        if message.item_id is not None:
            self.item_tree.set_item_error(message.item_id, message.error)
        elif message.base_id is not None:
            self.bases_pane.set_notice(message.base_id, message.error)

    # --- actions ----------------------------------------------------------------

    def key(self, binding_id: str) -> str:
        """The key bound to `binding_id` now (after the user's keymap), for hints."""
        return key_for(binding_id, self.keymap_overrides)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """True: the key works now (shown in the footer); False: it does not apply here (hidden)."""
        if isinstance(self.screen, Dialog):
            if action in _PANE_ACTIONS:
                return False  # a dialog is open: its own keys only (the app's would stack dialogs)
            if action == "help" and isinstance(self.screen, HelpScreen):
                return False
        if self.ready and not self._alive():
            return False
        if not self.ready and action not in ("help", "quit", "change_theme", "command_palette"):
            return False if action in _ACTION_NAMES else True
        base = self.bases_pane.current_base if self.ready else None
        item = self.item_tree.current_item if self.ready else None
        usable = base is not None and base.is_usable
        match action:
            case "edit_base" | "delete_base" | "restore_base":
                return base is not None
            case "add_items" | "reindex_base":
                return usable
            case "delete_item" | "reindex_item" | "item_info":
                return usable and item is not None
            case "chunks" | "similar":
                return usable and item is not None and item.type.is_leaf
            case "toggle_watch":
                return usable and item is not None and item.is_root and item.type == ItemType.DIRECTORY
            case "focus_search" | "cycle_mode":
                return usable  # a failed base cannot be searched until restored
            case "focus_pane":
                return parameters != ("results",) or usable
        return True

    _availability: tuple = ()
    _CURSOR_ACTIONS = ("delete_item", "reindex_item", "item_info", "chunks", "similar", "toggle_watch")

    def on_tree_node_highlighted(self, event) -> None:
        if not self._alive():
            return
        # Re-render the footer only when what the cursor allows actually changed: a
        # footer refresh per j/k press would cost more than the move itself.
        availability = tuple(self.check_action(a, ()) for a in self._CURSOR_ACTIONS)
        if availability != self._availability:
            self._availability = availability
            self.refresh_bindings()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.keymap_overrides))

    def action_focus_search(self) -> None:
        self.query_one("#query", Input).focus()

    def action_focus_pane(self, pane: str) -> None:
        """1 / 2 / 3: jump to the bases, the items or the search results."""
        if pane == "results" and not self.search_pane.results:
            pane = "query"  # nothing to move through yet: the query box is where to go
        selector = PANES.get(pane)
        if selector is not None:
            self.query_one(selector).focus()

    def action_cycle_mode(self) -> None:
        mode = self.search_pane.cycle_mode()
        self.notify(f"Search mode: {mode}", timeout=2)

    def action_refresh(self) -> None:
        self.reload_bases()
        self.item_tree.reload()

    # --- the theme is a preference: saved in the settings file, restored at start ----

    def watch_theme(self, theme: str) -> None:
        if not self._theme_restored or self.settings_file is None or theme == self.settings.theme:
            return
        self.run_worker(self._save_theme(theme), group="settings", exclusive=True, exit_on_error=False)

    async def _save_theme(self, theme: str) -> None:
        path = self.settings_file
        assert path is not None
        try:
            await asyncio.to_thread(save_top_level, path, "theme", theme)
        except (OSError, ValueError) as exc:
            self.notify(f"The theme could not be saved in {path}: {exc}", severity="warning")

    # --- search -------------------------------------------------------------------

    @on(Input.Submitted, "#query")
    def _run_search(self, event: Input.Submitted) -> None:
        self.start_search()

    @on(Select.Changed, "#mode")
    def _mode_changed(self, event: Select.Changed) -> None:
        if self.search_pane.results:
            self.start_search()  # the same query again, in the new mode

    @on(Input.Submitted, "#topk")
    def _topk_submitted(self, event: Input.Submitted) -> None:
        self.start_search()

    @on(OptionList.OptionSelected, "#results")
    def _open_result(self, event: OptionList.OptionSelected) -> None:
        self.open_result()


__all__ = ["KtuiApp"]

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
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.widgets import Input, Label, OptionList, Select

from ktui.core import Settings
from ktui.core.errors import KnowledgeError, StoreDamagedError
from ktui.core.models import (
    BaseChanged,
    BaseRemoved,
    ItemChanged,
    ItemsAdded,
    ItemsRemoved,
    ItemType,
    KnowledgeBase,
    QueueStats,
)
from ktui.core.service import KnowledgeService
from ktui.tui.base_rebuild import reindex_whole_base
from ktui.tui.demo_base import ensure_demo
from ktui.tui.keymap import APP_ACTIONS, bindings, display_key, key_for, key_of, unknown_ids
from ktui.tui.messages import (
    BaseDeleted,
    BaseReindexed,
    BasesLoaded,
    DemoReady,
    Outcome,
    ReindexQueued,
    SearchFinished,
    ServiceEvents,
    ServiceFailed,
    StoreDamaged,
    WatchSet,
)
from ktui.tui.screens.add_items import AddItemsScreen
from ktui.tui.screens.base_form import BaseFormScreen
from ktui.tui.screens.chunks import ChunkBrowserScreen, ChunkContextScreen
from ktui.tui.screens.common import Dialog, error_text
from ktui.tui.screens.confirm import ConfirmScreen
from ktui.tui.screens.help import HelpScreen
from ktui.tui.screens.item_detail import ItemDetailScreen
from ktui.tui.screens.restore import RestoreScreen
from ktui.tui.screens.similar import SimilarScreen
from ktui.tui.search_query import parse_query
from ktui.tui.settings_file import save_top_level
from ktui.tui.text import clean, literal, shorten
from ktui.tui.widgets.bases_pane import BasesPane
from ktui.tui.widgets.item_tree import ItemOpened, ItemTree
from ktui.tui.widgets.key_footer import KeyFooter
from ktui.tui.widgets.search_pane import SearchPane, short_source
from ktui.tui.widgets.status_line import StatusLine

REFRESH_HZ = 15
TOAST_LIMIT = 2000  # characters of a toast (the details views show whole errors)
PANES = {"bases": "#bases", "items": "#items", "results": "#results", "query": "#query"}


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


_ACTION_NAMES = {a.action.split("(")[0] for a in APP_ACTIONS}
_PANE_ACTIONS = _ACTION_NAMES - {"help", "quit", "change_theme"}


class KtuiApp(App[int]):
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

    # --- events: one worker, time-batched, coalesced ---------------------------

    async def _pump_events(self) -> None:
        sub = self._subscription
        assert sub is not None
        while not sub.closed:
            batch = await sub.next_batch()
            if batch:
                self.post_message(ServiceEvents(batch))
            # while we sleep the subscription coalesces (latest state per item wins)
            await asyncio.sleep(self.refresh_interval)

    def on_service_events(self, message: ServiceEvents) -> None:
        if not self._alive():
            return
        tree = self.item_tree
        base_id = tree.base_id
        changes: dict[str, ItemChanged] = {}
        stats: QueueStats | None = None
        bases_dirty = False
        # a base being rebuilt: its store's state is re-read as its items index (a few bases, once per batch)
        rebuilding = {b.id for b in self.bases_pane.bases.values() if b.needs_rebuild}
        with self.batch_update():
            for ev in message.events:
                match ev:
                    case ItemChanged():
                        if ev.base_id == base_id:
                            changes[ev.item_id] = ev
                        if ev.base_id in rebuilding:
                            bases_dirty = True
                    case ItemsAdded():
                        bases_dirty = True
                        if ev.base_id == base_id:
                            if changes:
                                tree.apply_changes(changes)
                                changes = {}
                            tree.items_added(ev.group_id, ev.item_ids)
                    case ItemsRemoved():
                        bases_dirty = True
                        if ev.base_id == base_id:
                            for item_id in ev.item_ids:
                                changes.pop(item_id, None)
                            tree.remove_items(ev.item_ids)
                    case BaseChanged() | BaseRemoved():
                        bases_dirty = True
                    case QueueStats():
                        stats = ev
            if changes:
                tree.apply_changes(changes)
            if stats is not None:
                self.query_one(StatusLine).update_stats(stats)
        self.batches_applied += 1
        if bases_dirty:
            self.reload_bases()

    # --- bases ------------------------------------------------------------------

    def reload_bases(self) -> None:
        """Fetch bases, groups and counts; at most one fetch in flight, one queued."""
        if self._bases_loading:
            self._bases_dirty = True
            return
        self._bases_loading = True
        self.run_worker(self._fetch_bases(), group="bases", exit_on_error=False)

    async def _fetch_bases(self) -> None:
        try:
            bases: list[KnowledgeBase] = []
            page = 1
            while True:
                result = await self.ks.list_bases(page=page, limit=100)
                bases.extend(result.items)
                if page >= result.pages:
                    break
                page += 1
            groups = await self.ks.list_groups()
            counts = await self.ks.item_counts()
        except KnowledgeError as exc:
            self.post_message(ServiceFailed("Loading bases failed", str(exc)))
            self.post_message(BasesLoaded([], [], {}, ok=False))  # clears the in-flight flag
            return
        self.post_message(BasesLoaded(bases, groups, counts))

    def on_bases_loaded(self, message: BasesLoaded) -> None:
        if not self._alive():
            self._bases_loading = False
            return
        self._bases_loading = False
        if message.ok:
            pane = self.bases_pane
            self.groups = {g.id: g.name for g in message.groups}
            pane.show_bases(message.bases, message.groups, message.counts)
            if self._select_after_load and self._select_after_load in pane.bases:
                pane.highlighted = pane.get_option_index(self._select_after_load)
                self._select_after_load = None
            self._sync_selection()
        if self._bases_dirty:
            self._bases_dirty = False
            self.reload_bases()

    @on(OptionList.OptionHighlighted, "#bases")
    def _base_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._sync_selection()

    def _sync_selection(self) -> None:
        if not self._alive():
            return
        base = self.bases_pane.current_base
        tree = self.item_tree
        base_id = base.id if base else None
        if base_id != tree.base_id:
            tree.load_base(base_id)
            self.search_pane.clear_results()
            if base is not None:
                self.search_pane.set_defaults(base.search_mode.value, base.top_k)
        self.search_pane.show_store_problem(base, self.key("base.reindex"))
        title = self.query_one("#items-title", Label)
        if base is not None:
            title.update(literal(f"Items — {base.emoji} {shorten(base.name, 200)}", one_line=True))
        elif not self.bases_pane.bases:
            title.update(literal(f"No base: {self.key('base.new')} creates one", one_line=True))
        else:
            title.update(literal("Items"))
        self.refresh_bindings()

    def _select_base(self, base: KnowledgeBase | None) -> None:
        if base is not None:
            self._select_after_load = base.id
        self.reload_bases()

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

    # --- bases ---------------------------------------------------------------------

    def action_new_base(self) -> None:
        self.push_screen(BaseFormScreen(default_model=self.settings.default_embedding_model), self._base_saved)

    def action_edit_base(self) -> None:
        base = self.current_base
        if base is None:
            return
        group = self.groups.get(base.group_id, "") if base.group_id else ""
        self.push_screen(BaseFormScreen(base, group_name=group), self._base_saved)

    def _base_saved(self, base: KnowledgeBase | None) -> None:
        if base is not None:
            self.notify(f"Saved base “{base.name}”", timeout=3)
            if base.id in self.bases_pane.bases and base.id == self.item_tree.base_id:
                self.search_pane.set_defaults(base.search_mode.value, base.top_k)
            self._select_base(base)

    def action_delete_base(self) -> None:
        base = self.current_base
        if base is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.call_service(f"Deleting “{base.name}”", self.ks.delete_base(base.id), BaseDeleted,
                                  base_id=base.id, name=base.name)

        self.push_screen(ConfirmScreen("Delete base", f"Delete “{base.name}” with all its items and vectors?"),
                         confirmed)

    def action_reindex_base(self) -> None:
        base = self.current_base
        if base is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.call_service(f"Reindexing “{base.name}”", reindex_whole_base(self.ks, base), BaseReindexed,
                                  base_id=base.id, name=base.name)

        why = ("Its store needs a rebuild. " if base.needs_rebuild else "")
        self.push_screen(ConfirmScreen("Reindex all", f"{why}Read and embed every item of “{base.name}” again?",
                                       confirm_label="Reindex"), confirmed)

    def action_restore_base(self) -> None:
        base = self.current_base
        if base is None:
            return

        def restored(new: KnowledgeBase | None) -> None:
            if new is not None:
                self.notify(f"Restored as “{new.name}” with {new.embedding_model_id}", timeout=4)
                self._select_base(new)

        self.push_screen(RestoreScreen(base, self.settings.default_embedding_model), restored)

    # --- items -----------------------------------------------------------------------

    def action_add_items(self) -> None:
        base = self.current_base
        if base is None:
            return

        screen = AddItemsScreen(base.id, base.name, self.start_dir, initial_tab=self.last_add_tab)

        def added(items: list | None) -> None:
            self.last_add_tab = screen.active_tab
            if items:
                self.notify(f"Added {len(items)} item(s); indexing…", timeout=3)

        self.push_screen(screen, added)

    def action_delete_item(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is None or item is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.call_service("Delete", self.ks.delete_items(base.id, [item.id]), item_id=item.id)

        self.push_screen(ConfirmScreen("Delete item", f"Delete “{item.display_name}” and its chunks?"), confirmed)

    def action_reindex_item(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is None or item is None:
            return
        self.call_service("Reindex", self.ks.reindex_items(base.id, [item.id]), ReindexQueued, item_id=item.id,
                          name=item.display_name)

    def action_toggle_watch(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is None or item is None:
            return
        node = self.item_tree.nodes_by_id.get(item.id)
        watch = not (node.data.watch if node is not None and node.data is not None else False)
        self.call_service("Watch", self.ks.set_watch(base.id, item.id, watch), WatchSet, item_id=item.id,
                          folder_id=item.id, name=item.display_name, watch=watch)

    def action_item_info(self) -> None:
        item = self.item_tree.current_item
        if item is not None:
            self.push_screen(ItemDetailScreen(item))

    def on_item_opened(self, message: ItemOpened) -> None:
        if not isinstance(self.screen, Dialog):
            self.push_screen(ItemDetailScreen(message.item))

    def action_chunks(self) -> None:
        item = self.item_tree.current_item
        if item is not None:
            self.push_screen(ChunkBrowserScreen(item))

    def action_similar(self) -> None:
        base, item = self.current_base, self.item_tree.current_item
        if base is not None and item is not None:
            self.push_screen(SimilarScreen(base, item))

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

    @on(OptionList.OptionSelected, "#results")
    def _open_result(self, event: OptionList.OptionSelected) -> None:
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


__all__ = ["KtuiApp"]

"""KnowledgeService: the one facade the TUI, the CLI, scripts and tests use.

    async with await KnowledgeService.open(data_dir) as ks:
        base = await ks.create_base("Notes")
        await ks.add_items(base.id, [ItemInput("file", {"path": "README.md"})])
        await ks.wait_idle()
        print((await ks.search(base.id, "install")).results)

Workflow calls go to the orchestration layer (which drives the runtime); the
read/patch Data API goes straight to the data services and has no vector-store
side effects. The signatures say what a caller should pass; every argument is
still validated at run time (JSON, CLI and HTTP callers pass raw values): bad
input raises `ValidationError` naming the field, and nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack

from ktui.core.catalogue import Catalogue
from ktui.core.config import Settings, load_settings
from ktui.core.data.base_service import KnowledgeBaseService
from ktui.core.data.imports import ImportLedger
from ktui.core.data.item_service import KnowledgeItemService
from ktui.core.data.validation import require_id, require_ids, require_model_id
from ktui.core.db import Database
from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import InvalidOperationError, KnowledgeError, ReadOnlyError
from ktui.core.lockfile import DataDirLock, HolderInfo, busy_message, read_holder
from ktui.core.models import (
    ROOT,
    BaseConfig,
    ChunkRecord,
    CursorPage,
    FolderFollower,
    GroupFilter,
    ItemInput,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeGroup,
    KnowledgeItem,
    ModelListing,
    ModelProfile,
    Page,
    QueueStats,
    SearchFilters,
    SearchMode,
    SearchResponse,
)
from ktui.core.naming import resolve_base, resolve_group, resolve_item
from ktui.core.orchestration import KnowledgeOrchestrationService
from ktui.core.runtime.claims import NO_CLAIMS, WorkClaims
from ktui.core.runtime.events import EventBus, Subscription
from ktui.core.runtime.following import ProcessClaims
from ktui.core.runtime.invariants import check_invariants
from ktui.core.runtime.remote import RemoteEvents, progress_payload
from ktui.core.runtime.service import KnowledgeRuntimeService
from ktui.core.runtime.status import StateWriter
from ktui.core.store import StoreManager, Stores

if TYPE_CHECKING:
    from ktui.core.doctor import DoctorReport
    from ktui.core.engine import RankResult
    from ktui.core.store.postgres.leases import Leases
    from ktui.core.transfer import ImportReport
    from ktui.core.transfer.migrate import MigrationReport, Progress

# What add_items accepts: ItemInput, or its `{"type", "data"}` mapping form (JSON callers).
ItemInputLike = ItemInput | Mapping[str, Any]

class KnowledgeService:
    def __init__(self, settings: Settings, db: Catalogue, *, read_only: bool = False, stores: Stores | None = None,
                 claims: WorkClaims | None = None, process_claims: ProcessClaims | None = None):
        self.settings = settings
        self.read_only = read_only
        self._db = db
        self._bus = EventBus()
        self._bases = KnowledgeBaseService(db)
        self._items = KnowledgeItemService(db)
        self._state = StateWriter(db, self._bus)  # every catalogue write, and its event
        self._stores: Stores = stores if stores is not None else StoreManager(settings.data_dir, read_only=read_only)
        self._shared = stores is not None  # a shared store (PostgreSQL): every process writes, no lock
        if read_only:  # a reader keeps query embeddings in memory: the cache file is the holder's
            settings = settings.with_(embeddings=replace(settings.embeddings, persistent_cache_entries=0))
        self._embeddings = EmbeddingService(settings)
        self._runtime = KnowledgeRuntimeService(
            settings=settings,
            bases=self._bases,
            items=self._items,
            state=self._state,
            stores=self._stores,
            embeddings=self._embeddings,
            bus=self._bus,
            claims=claims or NO_CLAIMS,  # a shared store's work claims (core/runtime/claims.py)
            process_claims=process_claims,  # and its imports in flight / followed folders (following.py)
        )
        self._process_claims = process_claims
        self._workflow = KnowledgeOrchestrationService(
            settings=settings,
            bases=self._bases,
            items=self._items,
            runtime=self._runtime,
            stores=self._stores,
            embeddings=self._embeddings,
            bus=self._bus,
        )
        self._imports = ImportLedger(db)
        self._closed = False
        self._lock: DataDirLock | None = None
        self._listener: Any = None  # a shared store's LISTEN thread (core/store/postgres/notify.py)
        self._remote: RemoteEvents | None = None
        self._relay: Any = None  # a shared store's progress relay (notify.py ProgressRelay)

    @classmethod
    async def open(
        cls,
        data_dir: Path | str | None = None,
        settings: Settings | None = None,
        *,
        read_only: bool = False,
        recover: bool = True,
        watch: bool = True,
        command: str = "ktui",
        recovery_gate: Callable[[], Awaitable[None]] | None = None,
        leases: Leases | None = None,
    ) -> KnowledgeService:
        """Open (creating if needed) the data directory and start the runtime.

        The opener holds the directory (one process at a time; a second one gets
        `DataDirInUseError` naming the holder). With `recover`, work that a
        shutdown interrupted or a crash left `processing` is queued again, and
        watched folders are followed, in the background: this returns as soon as
        the queue runs, reads answer meanwhile, `wait_idle` (and `wait_recovered`)
        wait for it. One-shot commands pass `recover=False`: recovery is the
        long-running holder's job, done once there. `recovery_gate`, when given, is
        awaited before each recovery batch (tests hold recovery at a chosen point).
        `watch=False` recovers without following watched folders (a command that only
        waits for its work: `--wait` on a shared store sweeps, but follows no folder).

        `read_only=True` opens a reader instead: no lock, no runtime, no recovery,
        no write of any file; it sees committed state through SQLite's WAL while
        another process holds the directory, and every workflow or patch call
        raises `ReadOnlyError`. `command` names the holder in the lock file.
        `leases` (a shared store only) sets this process's lease owner id, TTL and clock
        (`ktui.core.store.postgres.leases.Leases`; tests inject a clock and a host).
        """
        if settings is None:
            settings = load_settings(data_dir=data_dir)
        elif data_dir is not None:
            settings = settings.with_(data_dir=Path(data_dir))
        if settings.store.postgres:
            return await cls._open_shared(settings, read_only=read_only, recover=recover, recovery_gate=recovery_gate,
                                          leases=leases, watch=watch)
        if read_only:
            db = await Database.open_readonly(Path(settings.data_dir))
            return cls(settings, db, read_only=True)
        lock = DataDirLock(Path(settings.data_dir))
        lock.acquire(command)
        try:
            db = await Database.open(Path(settings.data_dir))
        except BaseException:
            lock.release()
            raise
        service = cls(settings, db)
        service._lock = lock
        try:
            await service._runtime.start(recover=recover, before_recovery=service._discard_interrupted_imports,
                                         recovery_gate=recovery_gate, watch=watch)
        except BaseException:
            await service.close()
            raise
        return service

    @classmethod
    async def _open_shared(
        cls,
        settings: Settings,
        *,
        read_only: bool,
        recover: bool = True,
        recovery_gate: Callable[[], Awaitable[None]] | None = None,
        leases: Leases | None = None,
        watch: bool = True,
    ) -> KnowledgeService:
        """Open a data directory whose catalogue and chunks live in PostgreSQL (docs/postgres.md).

        Every process is a writer: no lock, no holder. The local data directory keeps the
        settings, logs and the embedding cache. A writer LISTENs for the other processes'
        catalogue writes and publishes them as its own events, and runs items only under
        their leases (PgWorkClaims): with `recover`, its heartbeat sweeps up the unfinished
        items nobody alive holds (a killed process's, once their leases expire). Watched
        folders and interrupted imports follow the rule of core/runtime/following.py: a
        folder is followed by one process of its machine that runs a watcher, an import
        is discarded only once its importer's lease expired.
        """
        from ktui.core.store.postgres import PgStoreManager, PgTuning
        from ktui.core.store.postgres.catalogue import PgDatabase
        from ktui.core.store.postgres.leases import LeaseOwner, Leases
        from ktui.core.store.postgres.notify import Listener, ProgressRelay, new_origin, with_origin
        from ktui.core.store.postgres.process_leases import with_lease_ttl
        from ktui.core.store.postgres.work_claims import PgWorkClaims

        assert settings.store.url is not None
        # one id per process: its connections' origin (NOTIFY, the import trigger) and its leases' owner
        origin = leases.owner if leases is not None else new_origin()
        # the import trigger's first lease lives as long as this process's leases do
        conninfo = with_lease_ttl(with_origin(settings.store.url, origin),
                                  leases.ttl if leases is not None else settings.store.lease_ttl)
        schema = settings.store.schema
        Path(settings.data_dir).mkdir(mode=0o700, parents=True, exist_ok=True)  # the local cache lives there
        db = await PgDatabase.open(conninfo, schema=schema)
        stores = PgStoreManager(conninfo, schema=schema, tuning=PgTuning(build_memory=settings.store.build_memory))
        claims = None if read_only else PgWorkClaims(
            conninfo, schema, leases=leases or Leases(LeaseOwner(origin), ttl=settings.store.lease_ttl))
        service = cls(settings, db, read_only=read_only, stores=stores, claims=claims, process_claims=claims)
        try:
            if not read_only:
                remote = service._remote = RemoteEvents(db, service._bus,
                                                         on_payloads=service._runtime.remote_payloads)
                remote.start()
                loop = asyncio.get_running_loop()

                def on_loop(fn: Callable[..., None], *args: Any) -> None:
                    try:
                        loop.call_soon_threadsafe(fn, *args)
                    except RuntimeError:  # the loop has closed: nobody is listening any more
                        pass

                listener = service._listener = Listener(
                    conninfo, schema, origin=origin,
                    deliver=lambda batch: on_loop(remote.feed, batch), on_resync=lambda: on_loop(remote.resync),
                )
                await asyncio.to_thread(listener.start)
                relay = service._relay = ProgressRelay(conninfo, schema, origin=origin)
                relay.start()
                service._state.relay_progress = lambda e: relay.send(progress_payload(e))
                await service._runtime.start(recover=recover, recovery_gate=recovery_gate, watch=watch,
                                             before_recovery=service._discard_interrupted_imports)
        except BaseException:
            await service.close()
            raise
        return service

    async def _discard_interrupted_imports(self) -> None:
        """A base whose import was killed before its last item was in is removed whole
        (rows and store files): an import is all-or-nothing. One indexed query at open; on
        a shared store only those whose importer's lease expired (following.py), at open
        and at each heartbeat of a recovering process."""
        claims = self._process_claims
        unfinished = await claims.interrupted_imports() if claims is not None else await self._imports.unfinished()
        for base_id in unfinished:
            try:
                await self._workflow.delete_base(base_id)
            except KnowledgeError:
                logging.getLogger(__name__).exception("could not discard the interrupted import of %s", base_id)
                if claims is not None:
                    await claims.give_back_imports([base_id])

    def announce(self, command: str, url: str | None = None) -> None:
        """Tell other processes who holds the directory and where to reach it (the
        lock file; shown when they are refused a write)."""
        if self._lock is not None:
            self._lock.announce(command, url)

    def holder(self) -> HolderInfo | None:
        """Who holds the data directory, as its lock file says (None when no one ever did)."""
        return read_holder(Path(self.settings.data_dir))

    def _writable(self) -> None:
        if self.read_only:
            holder = self.holder()
            if holder is not None and holder.alive():
                raise ReadOnlyError(
                    "This ktui only reads. " + busy_message(Path(self.settings.data_dir), holder)
                )
            raise ReadOnlyError(
                f"This ktui opened {self.settings.data_dir} read-only; writing needs the process that holds it"
            )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._listener is not None:
                await asyncio.to_thread(self._listener.close)
            if self._remote is not None:
                await self._remote.close()
            if self._relay is not None:
                self._state.relay_progress = None
                await asyncio.to_thread(self._relay.close)
            if not self.read_only:
                await self._runtime.close()
        finally:
            self._bus.close()
            await asyncio.to_thread(self._stores.close_all)
            await self._embeddings.aclose()
            await self._db.close()
            if self._lock is not None:
                self._lock.release()

    async def __aenter__(self) -> KnowledgeService:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- workflow (the nine runtime operations) ----------------------------

    async def create_base(
        self,
        name: str,
        embedding_model_id: str | None = None,
        dimensions: int | None = None,
        *,
        group_name: str | None = None,
        **config: Unpack[BaseConfig],
    ) -> KnowledgeBase:
        """Create a base. `group_name` files it under the group of that name, creating the
        group together with the base (a refused base leaves no group behind); `group_id`
        in `config` names an existing group instead."""
        self._writable()
        return await self._workflow.create_base(name, embedding_model_id, dimensions, group_name=group_name, **config)

    async def restore_base(
        self, source_base_id: str, embedding_model_id: str, dimensions: int | None, name: str | None = None
    ) -> KnowledgeBase:
        self._writable()
        return await self._workflow.restore_base(source_base_id, embedding_model_id, dimensions, name)

    async def delete_base(self, base_id: str) -> None:
        self._writable()
        await self._workflow.delete_base(base_id)

    async def add_items(self, base_id: str, items: Sequence[ItemInputLike]) -> list[KnowledgeItem]:
        """Accept items; returns once their rows exist (indexing continues in the queue)."""
        self._writable()
        return await self._workflow.add_items(base_id, items)

    async def delete_items(self, base_id: str, item_ids: Sequence[str]) -> None:
        self._writable()
        await self._workflow.delete_items(base_id, item_ids)

    async def reindex_items(self, base_id: str, item_ids: Sequence[str], *, force: bool = False) -> list[KnowledgeItem]:
        """Index items again; folders refresh incrementally unless `force` rebuilds them."""
        self._writable()
        return await self._workflow.reindex_items(base_id, item_ids, force=force)

    async def set_watch(self, base_id: str, item_id: str, watch: bool) -> KnowledgeItem:
        """Follow a top-level folder item's changes while ktui runs (resumed at every start)."""
        self._writable()
        return await self._workflow.set_watch(base_id, item_id, watch)

    async def search(
        self,
        base_id: str,
        query: str,
        top_k: int | None = None,
        *,
        mode: SearchMode | str | None = None,
        filters: SearchFilters | Mapping[str, Any] | None = None,
    ) -> SearchResponse:
        """Search a base; `mode` overrides the base's search mode for this call; `filters`
        (a SearchFilters or a mapping of its fields) keeps only matching items' chunks."""
        return await self._workflow.search(base_id, query, top_k, mode=mode, filters=filters)

    async def search_bases(
        self,
        base_ids: Sequence[str] | None,
        query: str,
        top_k: int | None = None,
        *,
        mode: SearchMode | str | None = None,
        filters: SearchFilters | Mapping[str, Any] | None = None,
    ) -> SearchResponse:
        """Search several bases (None = every usable base); results merged by relevance,
        each naming its base (`result.base_id`) and its rank there (`result.base_rank`);
        a base that degraded or lost its reranker is in `response.notices`. `top_k`
        defaults to the largest base top-K."""
        return await self._workflow.search_bases(base_ids, query, top_k, mode=mode, filters=filters)

    def model_notice(self, embedding_model_id: str) -> str | None:
        """A warning when the model's server answered as another model than the one named
        (it ignores the name); None when it did not, or before any answer was seen."""
        return self._embeddings.model_notice(require_model_id(embedding_model_id))

    def model_profile(self, embedding_model_id: str) -> ModelProfile:
        """How ktui uses a model: prefixes, input window, recommended mode (settings applied)."""
        model = require_model_id(embedding_model_id)
        return self._embeddings.profile(model)

    async def list_item_chunks(self, base_id: str, item_id: str) -> list[ChunkRecord]:
        return await self._workflow.list_item_chunks(base_id, item_id)

    async def delete_item_chunk(self, base_id: str, item_id: str, chunk_id: str) -> None:
        self._writable()
        await self._workflow.delete_item_chunk(base_id, item_id, chunk_id)

    async def similar_items(self, base_id: str, item_id: str, top_k: int | None = None) -> RankResult[KnowledgeItem]:
        """Items of the base most similar to this one (Knowledge Engine; never fails, may degrade)."""
        return await self._workflow.similar_items(base_id, item_id, top_k)

    # --- data API (read / patch only) --------------------------------------

    async def list_bases(self, page: int = 1, limit: int = 20) -> Page[KnowledgeBase]:
        listing = await self._bases.list_page(page, limit)
        return replace(listing, items=[self._with_store_state(b) for b in listing.items])

    async def get_base(self, base_id: str) -> KnowledgeBase:
        return self._with_store_state(await self._bases.get(base_id))

    def _with_store_state(self, base: KnowledgeBase) -> KnowledgeBase:
        """The base with `store_problem` filled in (one dict look-up and one stat)."""
        if not base.is_usable:
            return base
        problem = self._stores.problem(base.id)
        return base if problem is None else replace(base, store_problem=problem)

    async def update_base(self, base_id: str, patch: Mapping[str, Any]) -> KnowledgeBase:
        """Patch a base's settings (not its model or width). A `group_name` key moves it
        into the group of that name, created with the patch when there is none."""
        self._writable()
        if isinstance(patch, Mapping):
            self._embeddings.check_rerank_model(patch.get("rerank_model_id"))
        return await self._state.update_base(base_id, patch)

    async def list_items(
        self,
        base_id: str,
        type: ItemType | str | None = None,
        group_id: GroupFilter = ROOT,
        page: int = 1,
        limit: int = 20,
    ) -> Page[KnowledgeItem]:
        return await self._items.list_page(base_id, type=type, group_id=group_id, page=page, limit=limit)

    async def list_items_after(
        self,
        base_id: str,
        type: ItemType | str | None = None,
        group_id: GroupFilter = ROOT,
        cursor: str | None = None,
        limit: int = 100,
        *,
        newest_first: bool = True,
    ) -> CursorPage[KnowledgeItem]:
        """The items after `cursor` (None: from the start), filtered as `list_items`, in
        (created_at, id) order, newest first unless `newest_first=False`; pass the page's
        `next_cursor` back (with the same filters and order) for the next page, until it
        is None. `limit` is 1-1000.

        Why beside `list_items`: a page by number counts the matches and skips `offset`
        rows, so reading a whole base page by page costs O(n²) (60 s for 46,000 items).
        Here each page starts from its cursor in an index and counts nothing: O(n) for
        the whole listing, the same cost for the last page as for the first. Every item
        present from the first page to the last is returned exactly once, whatever is
        added or deleted meanwhile (an item added behind the cursor is not seen)."""
        return await self._items.list_after(base_id, type=type, group_id=group_id, cursor=cursor, limit=limit,
                                            newest_first=newest_first)

    async def iter_items(
        self,
        base_id: str,
        type: ItemType | str | None = None,
        group_id: GroupFilter = ROOT,
        *,
        newest_first: bool = True,
        page_size: int = 500,
    ) -> AsyncIterator[KnowledgeItem]:
        """Every matching item, `list_items_after` page by page (see there): memory holds
        one page at a time, and the whole listing costs O(n)."""
        cursor: str | None = None
        while True:
            page = await self.list_items_after(base_id, type, group_id, cursor, page_size, newest_first=newest_first)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_item(self, item_id: str) -> KnowledgeItem:
        return await self._items.get(item_id)

    async def statuses_below(self, item_ids: Sequence[str]) -> dict[str, ItemStatus]:
        """id -> status of every item below the given ones (not the given ones): one query,
        so a follower of a folder (`--wait`, `ktui watch`) knows its subtree without
        looking items up one by one."""
        return await self._items.statuses_below([require_id(i, "item_id") for i in item_ids])

    async def items_over_window(self, base_id: str) -> list[KnowledgeItem]:
        """The base's items whose chunks run past its embedding model's input window, as
        recorded when each was last indexed (`WindowOverflow.from_dict(item.data.window_overflow)`
        says by how much). One query, whatever the size of the base."""
        return await self._items.over_window(require_id(base_id, "base_id"))

    async def item_counts(self) -> dict[str, int]:
        """Number of items (all levels) per base id, for overviews."""
        return await self._items.count_by_base()

    # --- groups -------------------------------------------------------------

    async def create_group(self, name: str) -> KnowledgeGroup:
        self._writable()
        return await self._state.create_group(name)

    async def rename_group(self, group_id: str, name: str) -> KnowledgeGroup:
        self._writable()
        return await self._state.rename_group(group_id, name)

    async def delete_group(self, group_id: str) -> None:
        """Delete a group; its bases become ungrouped."""
        self._writable()
        await self._state.delete_group(group_id)

    async def list_groups(self) -> list[KnowledgeGroup]:
        return await self._bases.list_groups()

    # --- live state ---------------------------------------------------------

    def subscribe(self) -> Subscription:
        """Events from now on; iterate with `async for`, or take batches with `next_batch()`."""
        return self._bus.subscribe()

    async def wait_idle(self, base_id: str | None = None, timeout: float | None = None) -> bool:
        """Wait until no work is pending or running (for one base, or all). False on timeout."""
        if base_id is not None:
            base_id = require_id(base_id, "base_id")
        try:
            await asyncio.wait_for(self._runtime.wait_idle(base_id), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def recovering(self) -> bool:
        """The holder's recovery is still re-queuing unfinished work (or resuming watched
        folders); `queue_stats().recovering` says how many items it has left to look at."""
        return self._runtime.recovery.running

    async def folder_followers(self, item_ids: Sequence[str]) -> dict[str, FolderFollower]:
        """Who keeps these watched folders fresh (item id -> FolderFollower): this process,
        or on a shared store the machine a folder belongs to and whichever process there
        follows it now (docs/postgres.md), so `ktui watch` on another machine can say so."""
        ids = require_ids(list(item_ids), "item_ids")
        watcher = self._runtime.watcher
        claims = self._process_claims
        if claims is None or self.read_only:
            return {i: FolderFollower(here=watcher.watching(i)) for i in ids}
        from ktui.core.store.postgres.process_leases import host_of

        rows = await claims.followers(ids)
        out: dict[str, FolderFollower] = {}
        for i in ids:
            host, owner = rows.get(i, (None, None))
            out[i] = FolderFollower(here=watcher.watching(i), host=host, mine=host in (None, claims.host),
                                    follower=host_of(owner) if owner is not None else None)
        return out

    async def wait_recovered(self, timeout: float | None = None) -> bool:
        """Wait until recovery has queued what it found and the watched folders' refreshes
        (at once when none runs; the work itself may still be running). False on timeout."""
        try:
            await asyncio.wait_for(self._runtime.recovery.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def doctor(self, repair: bool = False) -> DoctorReport:
        """Check every file of the data directory (see `core/doctor.py`); with `repair`,
        fix what can be fixed (rebuilds are queued: `wait_idle` to see them finish)."""
        from ktui.core.doctor import Doctor

        if repair:
            self._writable()
        return await Doctor(self._db, self._bases, self._items, self._runtime, self._workflow).run(repair is True)

    async def check_invariants(self) -> list[str]:
        """Violations of the store/catalogue invariants (empty when all hold)."""
        return await check_invariants(self._bases, self._items, self._runtime)

    def queue_stats(self) -> QueueStats:
        return self._runtime.stats()

    async def list_embedding_models(self) -> ModelListing:
        return await self._embeddings.list_models()

    async def detect_dimensions(self, embedding_model_id: str) -> int:
        return await self._embeddings.detect_dimensions(require_model_id(embedding_model_id))

    # --- transfer -------------------------------------------------------------
    # Export / import (docs/export-format.md); the logic lives in core/transfer.py.

    async def export_bases(self, base_ids: Sequence[str], *, vectors: bool = False) -> dict[str, Any]:
        """A versioned export document: each base's settings and its root items' payloads.
        With `vectors`, each entry also carries its `index` (every item and every chunk with
        its vector), which an import for the same model and width restores without embedding;
        refused for a base that cannot be searched or is being indexed."""
        from ktui.core.data.validation import require_ids
        from ktui.core.transfer import build_export, export_entry
        from ktui.core.transfer.vectors import export_index

        groups = {g.id: g.name for g in await self.list_groups()}
        entries = []
        for base_id in require_ids(base_ids, "base_ids"):
            base = await self._bases.get(base_id)
            roots = await self._items.list_all(base.id, roots_only=True)
            entry = export_entry(base, roots, groups.get(base.group_id) if base.group_id else None)
            if vectors:
                if not base.is_usable or base.dimensions is None:
                    raise InvalidOperationError(f"Base '{base.name}' has no usable index to export "
                                                "(export it without --vectors)")
                store = await asyncio.to_thread(self._stores.get, base.id, base.dimensions)
                entry["index"] = await export_index(self._db, store, base.id, base.name)
            entries.append(entry)
        return build_export(entries)

    @staticmethod
    def read_document(path: Path | str) -> dict[str, Any]:
        """Load an export document or a legacy backup from a file ('-' reads stdin)."""
        from ktui.core.transfer import read_document

        return read_document(path)

    async def export_base(self, base_id: str) -> dict[str, Any]:
        return await self.export_bases([base_id])

    async def import_bases(self, document: Mapping[str, Any], *, again: bool = False) -> ImportReport:
        """Recreate the bases of an export document or a legacy backup; returns an ImportReport.

        Bases whose embedding model is usable here are created and their items
        queued; the others become failed `missing_embedding_model` bases with
        idle items, recoverable with `restore_base`. Each base is all-or-nothing: one
        whose import is interrupted is discarded at the next open. A base imported
        before with the same content (and still here) is reported `duplicate` and not
        created again, unless `again`.
        """
        from ktui.core.transfer import Importer, parse_document

        self._writable()
        parsed = parse_document(document)
        importer = Importer(bases=self._bases, state=self._state, workflow=self._workflow,
                            embeddings=self._embeddings, ledger=self._imports, again=again,
                            catalogue=self._db, stores=self._stores, bus=self._bus)
        return await importer.run(parsed)

    @staticmethod
    async def migrate(settings: Settings, to: str | Path, *, schema: str | None = None, merge: bool = False,
                      batch: int = 1000, progress: Progress | None = None) -> MigrationReport:
        """Copy the whole data directory `settings` names (its SQLite files, or its PostgreSQL
        schema) to `to`: a ``postgresql://`` URL (schema `schema`, default "ktui") or the path
        of a data directory for SQLite. Groups, bases with every setting, items with their
        status and data, chunks with their vectors: nothing is embedded again. Each base's
        items, chunks and vectors are counted on both sides afterwards (`report.ok`).

        Refused before anything is written (InvalidOperationError / ValidationError /
        DataDirInUseError): a bad URL, a target that is the source, a target that already
        holds bases (unless `merge`), a SQLite source or target held by a running ktui.
        The source is only read. See core/transfer/migrate.py for what an interruption leaves.
        """
        from ktui.core.errors import ValidationError
        from ktui.core.store_url import StoreUrlError, check_schema, check_store_url
        from ktui.core.transfer.migrate import Migrator

        target_schema = settings.store.schema if schema is None else schema
        try:
            check_schema(target_schema)
        except StoreUrlError as exc:
            raise ValidationError.field("schema", str(exc)) from None
        text = str(to).strip()
        target_url: str | None = None
        target_dir: Path | None = None
        if "://" in text or text.startswith(("postgres", "host=")):
            try:
                target_url = check_store_url(text)
            except StoreUrlError as exc:
                raise ValidationError.field("to", str(exc)) from None
        elif text:
            target_dir = Path(text).expanduser().resolve()
        else:
            raise ValidationError.field("to", "must be a postgresql:// URL or the path of a data directory")
        source_dir = Path(settings.data_dir).expanduser().resolve()
        if settings.store.url is None and target_dir == source_dir:
            raise ValidationError.field("to", f"is the source data directory itself ({source_dir})")
        if settings.store.url is not None and target_url is not None and target_schema == settings.store.schema:
            from ktui.core.store_url import redact_store_url

            if redact_store_url(settings.store.url) == redact_store_url(target_url):
                raise ValidationError.field("to", f"is the source store itself ({settings.store.where}); "
                                                  "name another schema with --schema")
        locks: list[DataDirLock] = []
        opened: list[Callable[[], Awaitable[None]]] = []  # how to close what was opened
        try:
            if settings.store.url is None:  # a running holder would go on writing what is being copied
                lock = DataDirLock(source_dir)
                lock.acquire("ktui migrate")
                locks.append(lock)
            source_db, source_stores = await _open_for_migration(settings.store.url, source_dir,
                                                                 settings.store.schema, opened, settings.store.build_memory)
            if target_dir is not None:
                lock = DataDirLock(target_dir)
                lock.acquire("ktui migrate")
                locks.append(lock)
            target_db, target_stores = await _open_for_migration(target_url, target_dir, target_schema, opened,
                                                                 settings.store.build_memory)
            migrator = Migrator(source_db, source_stores, target_db, target_stores,
                                source_where=source_db.where, target_where=target_db.where,
                                merge=merge, batch=batch, progress=progress)
            return await migrator.run()
        finally:
            for close in reversed(opened):
                await close()
            for lock in reversed(locks):
                lock.release()

    # --- naming (ktui.core.naming: the one place "find X by what a person typed" lives)

    async def resolve_base(self, ref: str) -> KnowledgeBase:
        """A base by id, unique name, unique id prefix/suffix, or case-insensitive name."""
        return self._with_store_state(resolve_base(await self._bases.list_all(), ref))

    async def resolve_item(self, base_id: str, ref: str) -> KnowledgeItem:
        """An item of the base (any level) by id, unique id prefix, source or display name."""
        base = await self._bases.get(base_id)
        return resolve_item(await self._items.list_all(base.id), ref)

    async def resolve_group(self, ref: str) -> KnowledgeGroup:
        """A group by id, exact name or case-insensitive name."""
        return resolve_group(await self._bases.list_groups(), ref)


async def _open_for_migration(url: str | None, data_dir: Path | None, schema: str,
                              opened: list[Callable[[], Awaitable[None]]], build_memory: str) -> tuple[Catalogue, Stores]:
    """The catalogue and the chunk stores of one side of a migration (appended to `opened`); a
    PostgreSQL target builds the HNSW index of a base that passes its size with the settings'
    `[store] build_memory`."""
    if url is None:
        assert data_dir is not None
        db: Catalogue = await Database.open(data_dir)
        opened.append(db.close)
        stores: Stores = StoreManager(data_dir)
    else:
        from ktui.core.store.postgres import PgStoreManager, PgTuning
        from ktui.core.store.postgres.catalogue import PgDatabase

        db = await PgDatabase.open(url, schema=schema)
        opened.append(db.close)
        stores = PgStoreManager(url, schema=schema, tuning=PgTuning(build_memory=build_memory))
    opened.append(lambda: asyncio.to_thread(stores.close_all))
    return db, stores

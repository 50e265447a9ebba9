"""`ktui watch [BASE...]`: keep watched folders fresh without the TUI.

A headless foreground process for a terminal multiplexer, a systemd user unit or
a launchd agent (examples in docs/cli.md). It holds the data directory like the
TUI does: the runtime follows every directory item with watch on, refreshes each
once at start (to pick up what changed while nothing watched) and then after
every change, reading and embedding only what changed (the incremental refresh).
On a shared PostgreSQL store it follows the folders this machine may follow and
nobody else does (core/runtime/following.py), and says per folder who follows it.

This module only reports: one line per change (a file indexed again, added,
failed or removed) on stdout, with `--json` one JSON object per line. A refresh
reads failed files again; one that is unchanged and fails the same way is not logged again. SIGINT and
SIGTERM stop it cleanly: running work is interrupted and picked up again the
next time anything opens the data directory; the exit code is 0.

The cost per event is O(1): which folder an item belongs to is a dictionary
built with one query per folder at start and extended from `ItemsAdded`; an item
is looked up only when it has changed, to name it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from typing import Any

from ktui.core import Settings
from ktui.core.errors import KnowledgeError
from ktui.core.models import ROOT, ItemChanged, ItemsAdded, ItemsRemoved, ItemStatus, KnowledgeItem
from ktui.tui.cli_render import json_text
from ktui.tui.cli_text import printable

EXIT_OK, EXIT_FAILURE = 0, 1
_TAIL = {"error": ": {}", "by": " by {}", "reason": " ({})", "count": " {} item(s)"}  # how an extra field reads on a line
FOLLOWERS_EVERY = 5.0  # seconds: on a shared store, how often who follows each folder is looked at again


class ChangeLog:
    """Turns events into one line per change for the followed folders."""

    def __init__(self, ks: Any, *, as_json: bool, out: Any = None):
        self.ks = ks
        self.as_json = as_json
        self.out = out or sys.stdout
        self.owner: dict[str, str] = {}  # item id -> the watched folder (root id) it lies in
        self.status: dict[str, ItemStatus] = {}
        self.base_names: dict[str, str] = {}
        self.roots: dict[str, KnowledgeItem] = {}
        # item id -> (error, size, mtime) of the failure last logged: every refresh reads
        # failed files again, and an unchanged file failing the same way is not a change
        self.failures: dict[str, tuple[str | None, int, int] | None] = {}
        self.following: dict[str, tuple[str, str | None]] = {}  # root id -> the last followers line

    async def followers(self) -> None:
        """One line per folder whose follower changed: `watching` when this process follows
        it; on a shared store `followed` by another process (its machine named), or
        `waiting` when nobody may follow it here (another machine's, or missing here)."""
        for root_id, who in (await self.ks.folder_followers(list(self.roots))).items():
            if who.here:
                line: tuple[str, str | None] = ("watching", None)
            elif who.follower is not None:
                line = ("followed", who.follower)
            elif not who.mine:
                line = ("waiting", f"the folder is {who.host}'s")
            else:
                line = ("waiting", "the folder is not on this machine")
            if self.following.get(root_id) == line:
                continue
            self.following[root_id] = line
            event, detail = line
            if event == "followed":
                self.emit(root_id, event, by=detail)
            elif event == "waiting":
                self.emit(root_id, event, reason=detail)
            else:
                self.emit(root_id, event)

    async def follow(self, root: KnowledgeItem, base_name: str) -> None:
        self.roots[root.id] = root
        self.base_names[root.base_id] = base_name
        self.owner[root.id] = root.id
        self.status[root.id] = root.status
        for item_id, status in (await self.ks.statuses_below([root.id])).items():
            self.owner[item_id] = root.id
            self.status[item_id] = status

    def emit(self, root_id: str, event: str, item: KnowledgeItem | None = None, **extra: Any) -> None:
        root = self.roots[root_id]
        base = self.base_names.get(root.base_id, root.base_id)
        if self.as_json:
            record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "event": event, "base": base,
                      "base_id": root.base_id, "folder": root.source}
            if item is not None:
                record |= {"item_id": item.id, "type": item.type.value, "source": item.source}
            record |= extra
            self.out.write(json_text(record) + "\n")
        else:
            what = f"{item.type.value} {item.source}" if item is not None else root.source
            tail = "".join(_TAIL.get(k, " {}").format(v) for k, v in extra.items())
            self.out.write(printable(f"{time.strftime('%H:%M:%S')}  {base}  {event:<8} {what}{tail}") + "\n")
        self.out.flush()

    async def apply(self, event: Any) -> None:
        if isinstance(event, ItemsAdded):
            root_id = self.owner.get(event.group_id or "")
            if root_id is not None:
                for item_id in event.item_ids:
                    self.owner[item_id] = root_id
                    self.status[item_id] = ItemStatus.PROCESSING
        elif isinstance(event, ItemsRemoved):
            gone = [i for i in event.item_ids if i in self.owner]
            if gone:
                root_id = self.owner[gone[0]]
                for item_id in gone:
                    self.owner.pop(item_id, None)
                    self.status.pop(item_id, None)
                    self.failures.pop(item_id, None)
                self.emit(root_id, "removed", count=len(gone))
        elif isinstance(event, ItemChanged) and event.item_id in self.owner:
            before = self.status.get(event.item_id)
            self.status[event.item_id] = event.status
            if event.status.is_terminal and before != event.status:
                await self._report(event)

    async def _report(self, event: ItemChanged) -> None:
        root_id = self.owner[event.item_id]
        try:
            item = await self.ks.get_item(event.item_id)
        except KnowledgeError:  # removed meanwhile: its removal is reported
            return
        if item.type.is_leaf:
            if event.status == ItemStatus.COMPLETED:
                self.failures.pop(item.id, None)
                self.emit(root_id, "indexed", item)
            else:
                failure = _failure_key(item)
                if failure is not None and self.failures.get(item.id) == failure:
                    return  # retried by a refresh of its folder, unchanged, failed the same way
                self.failures[item.id] = failure
                self.emit(root_id, "failed", item, error=item.error)
        elif item.id == root_id and event.status == ItemStatus.FAILED and item.error and "child" not in item.error:
            self.emit(root_id, "failed", item, error=item.error)  # the folder itself (gone, empty)


def _failure_key(item: KnowledgeItem) -> tuple[str | None, int, int] | None:
    """What a failed file's log line stands for: its error and the file's size and mtime
    now (None when it cannot be stat'ed, or for a page or note: always logged)."""
    path = getattr(item.data, "path", None)
    if not isinstance(path, str):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (item.error, st.st_size, st.st_mtime_ns)


async def _watched_folders(ks: Any, bases: list[Any]) -> list[tuple[Any, KnowledgeItem]]:
    found: list[tuple[Any, KnowledgeItem]] = []
    for base in bases:
        page = 1
        while True:
            listing = await ks.list_items(base.id, type="directory", group_id=ROOT, page=page, limit=100)
            found += [(base, i) for i in listing.items if getattr(i.data, "watch", False)]
            if page >= listing.pages:
                break
            page += 1
    return found


async def cmd_watch(settings: Settings, args: argparse.Namespace) -> int:
    from ktui.tui.cli_shared import all_bases, err, service

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    stopped_by: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        stopped_by.append(sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        async with service(settings, recover=True) as ks:
            sub = ks.subscribe()  # before the first await: the start-up refreshes are not missed
            bases = [await ks.resolve_base(ref) for ref in args.base] if args.base else await all_bases(ks)
            folders = await _watched_folders(ks, [b for b in bases if b.is_usable])
            if not folders:
                err("ktui: error: nothing to watch: no folder with watch on"
                    + (" in " + ", ".join(printable(b.name) for b in bases) if args.base else "")
                    + " (add one with `ktui add BASE DIR --watch`)")
                return EXIT_FAILURE
            log = ChangeLog(ks, as_json=args.json)
            for base, root in folders:
                await log.follow(root, base.name)
            shared = settings.store.postgres
            if shared:  # which folders this process took is known once its first pass ended
                await ks.wait_recovered()
            await log.followers()
            waiter = asyncio.ensure_future(stop.wait())
            looked = loop.time()
            try:
                while not stop.is_set():
                    batch = asyncio.ensure_future(sub.next_batch())
                    due = max(0.0, looked + FOLLOWERS_EVERY - loop.time())
                    await asyncio.wait({batch, waiter}, return_when=asyncio.FIRST_COMPLETED,
                                       timeout=due if shared else None)
                    if batch.done():
                        for event in batch.result():
                            await log.apply(event)
                    else:
                        batch.cancel()
                        if stop.is_set():
                            break
                    # every FOLLOWERS_EVERY seconds, events or not (a folder taken over here
                    # comes with its refresh's events: waiting for a quiet moment missed it)
                    if shared and loop.time() - looked >= FOLLOWERS_EVERY:
                        looked = loop.time()
                        await log.followers()
            finally:
                waiter.cancel()
                sub.close()
            if not args.json:
                print(f"{time.strftime('%H:%M:%S')}  stopping ({stopped_by[0] if stopped_by else 'stop'}); "
                      "unfinished work resumes at the next start", flush=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return EXIT_OK

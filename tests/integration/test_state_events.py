"""Every state the catalogue writes is published as an event (issue 14: one owner for
each side effect, ktui.core.runtime.status.StateWriter).

The witness is SQLite itself, not the code under test: TEMP triggers on the
catalogue's connection (the one connection every write goes through) log each item
state, insert and delete and each base insert, update and delete that is actually
committed. A recorder on the event bus keeps every event as published (no
coalescing). After a workflow on the real runtime that goes through indexing,
failures, a folder refresh, a forced reindex, deletes, a base patch, a group delete,
a shutdown with work running and a base delete, each logged write must have its
event: the item's states in the order written, every new row in an ``ItemsAdded``,
every deleted row in an ``ItemsRemoved`` (or its base's ``BaseRemoved``), every base
write in a ``BaseChanged`` / ``BaseRemoved``.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

from ktui.core.models import (
    ANY_GROUP,
    BaseChanged,
    BaseRemoved,
    Event,
    ItemChanged,
    ItemInput,
    ItemsAdded,
    ItemsRemoved,
)
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import open_service, write_files

server = embedding_server_fixture(16)

_LOG = "INSERT INTO state_log (txn, kind, id, base_id, status, phase, error) VALUES (txn_no(), "
_WITNESS = [
    "CREATE TEMP TABLE state_log (seq INTEGER PRIMARY KEY, txn INTEGER, kind TEXT, id TEXT, base_id TEXT,"
    " status TEXT, phase TEXT, error TEXT)",
    "CREATE TEMP TRIGGER log_item_state AFTER UPDATE OF status, phase, error ON main.knowledge_item"
    " WHEN old.status IS NOT new.status OR old.phase IS NOT new.phase OR old.error IS NOT new.error"
    f" BEGIN {_LOG}'item', new.id, new.base_id, new.status, new.phase, new.error); END",
    "CREATE TEMP TRIGGER log_item_insert AFTER INSERT ON main.knowledge_item"
    f" BEGIN {_LOG}'item-added', new.id, new.base_id, new.status, new.phase, new.error); END",
    "CREATE TEMP TRIGGER log_item_delete AFTER DELETE ON main.knowledge_item"
    f" BEGIN {_LOG}'item-removed', old.id, old.base_id, NULL, NULL, NULL); END",
    "CREATE TEMP TRIGGER log_base_insert AFTER INSERT ON main.knowledge_base"
    f" BEGIN {_LOG}'base', new.id, NULL, NULL, NULL, NULL); END",
    "CREATE TEMP TRIGGER log_base_update AFTER UPDATE ON main.knowledge_base"
    f" BEGIN {_LOG}'base', new.id, NULL, NULL, NULL, NULL); END",
    "CREATE TEMP TRIGGER log_base_delete AFTER DELETE ON main.knowledge_base"
    f" BEGIN {_LOG}'base-removed', old.id, NULL, NULL, NULL, NULL); END",
]


class _Recorder:
    """Sits on the bus like a subscription and keeps every event, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def _push(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:  # the bus closes its subscriptions when the service closes
        pass


def _install_witness(conn: sqlite3.Connection) -> None:
    """The log, and a transaction number for it: a state overwritten inside the same
    transaction (a container set `processing`, then reconciled) was never committed,
    so only each transaction's last state of an item counts."""
    begun = [0]

    def trace(statement: str) -> None:
        if statement.lstrip().upper().startswith("BEGIN"):
            begun[0] += 1

    conn.set_trace_callback(trace)
    conn.create_function("txn_no", 0, lambda: begun[0])
    for statement in _WITNESS:
        conn.execute(statement)


async def _logged(ks) -> list[tuple]:
    def read(conn: sqlite3.Connection) -> list[tuple]:
        rows = conn.execute("SELECT txn, kind, id, base_id, status, phase, error FROM temp.state_log ORDER BY seq")
        return [tuple(r) for r in rows]

    return await ks._db.run_in_transaction(read)  # noqa: SLF001 - the witness lives on that connection


def _is_subsequence(wanted: list, seen: list) -> bool:
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


async def test_every_state_write_publishes_its_event(tmp_path: Path, server) -> None:
    corpus = write_files(tmp_path / "corpus", {
        "guide/install.md": "# Install\n\nRun pip install ktui.\n",
        "guide/deep/search.md": "# Search\n\nHybrid search fuses keyword and vector ranking.\n",
        "guide/old.md": "# Old\n\nThis page will be deleted before the refresh.\n",
        "notes.txt": "Bananas are yellow.\n",
    })
    (corpus / "guide" / "broken.md").write_bytes(b"\x00\x01\x02binary\x00" * 50)  # fails: not text
    async with open_service(tmp_path / "data", server.url) as ks:
        recorder = _Recorder()
        ks._bus._subscriptions.append(recorder)  # noqa: SLF001 - a non-coalescing observer
        await ks._db.run_in_transaction(_install_witness)  # noqa: SLF001

        base = await ks.create_base("Docs", group_name="Team")
        folder, note, _file = await ks.add_items(base.id, [
            ItemInput("directory", {"path": str(corpus / "guide")}),
            ItemInput("note", {"content": "A note about grapes."}),
            ItemInput("file", {"path": str(corpus / "notes.txt")}),
        ])
        assert await ks.wait_idle(timeout=60)
        # a refresh: one file gone, one new, one changed
        (corpus / "guide" / "old.md").unlink()
        (corpus / "guide" / "new.md").write_text("# New\n\nA page that arrived later.\n")
        (corpus / "guide" / "install.md").write_text("# Install\n\nRun pipx install ktui.\n")
        await ks.reindex_items(base.id, [folder.id])
        assert await ks.wait_idle(timeout=60)
        await ks.reindex_items(base.id, [folder.id], force=True)
        assert await ks.wait_idle(timeout=60)
        children = (await ks.list_items(base.id, group_id=folder.id, limit=100)).items
        await ks.delete_items(base.id, [next(c.id for c in children if c.source.endswith("install.md"))])
        await ks.delete_items(base.id, [note.id])
        await ks.update_base(base.id, {"emoji": "📚"})
        team = next(g for g in await ks.list_groups() if g.name == "Team")
        await ks.delete_group(team.id)  # ungroups the base: a base write

        other = await ks.create_base("Other")
        await ks.add_items(other.id, [ItemInput("note", {"content": "About to be deleted with its base."})])
        assert await ks.wait_idle(timeout=60)
        await ks.delete_base(other.id)

        # shutdown with work queued and running: the unfinished items are failed
        server.faults.delay(0.3)
        await ks.add_items(base.id, [ItemInput("note", {"content": f"queued {n}"}) for n in range(4)])
        await ks._runtime.close()  # noqa: SLF001 - shut the runtime down, keep the catalogue open
        server.faults.clear()
        logged = await _logged(ks)
        remaining = (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).items

    events = recorder.events
    states: dict[str, list[tuple]] = defaultdict(list)
    added: set[str] = set()
    removed: set[str] = set()
    bases_changed: dict[str, int] = defaultdict(int)  # base id -> BaseChanged events
    bases_removed: set[str] = set()
    for event in events:
        match event:
            case ItemChanged(item_id=item_id, status=status, phase=phase, error=error):
                states[item_id].append((status.value, phase.value if phase else None, error))
            case ItemsAdded(item_ids=ids):
                added.update(ids)
            case ItemsRemoved(item_ids=ids):
                removed.update(ids)
            case BaseChanged(base_id=base_id):
                bases_changed[base_id] += 1
            case BaseRemoved(base_id=base_id):
                bases_removed.add(base_id)

    committed: dict[tuple[int, str], tuple] = {}  # (transaction, item) -> its last state there
    base_writes: set[tuple[int, str]] = set()  # (transaction, base) that wrote the base's row
    for txn, kind, ident, base_id, status, phase, error in logged:
        if kind == "item":
            committed.pop((txn, ident), None)  # re-inserted: dicts keep insertion order
            committed[(txn, ident)] = (status, phase, error)
        elif kind == "item-added":
            assert ident in added, f"item {ident} was inserted without ItemsAdded"
        elif kind == "item-removed":
            assert ident in removed or base_id in bases_removed, f"item {ident} was deleted without ItemsRemoved"
        elif kind == "base":
            base_writes.add((txn, ident))
        elif kind == "base-removed":
            assert ident in bases_removed, f"base {ident} was deleted without BaseRemoved"

    for base_id in {b for _, b in base_writes}:
        writes = sum(1 for _, b in base_writes if b == base_id)
        assert bases_changed[base_id] >= writes, (
            f"base {base_id} was written in {writes} transactions but changed {bases_changed[base_id]} times"
        )
    written: dict[str, list[tuple]] = defaultdict(list)
    for (_txn, ident), state in sorted(committed.items(), key=lambda kv: kv[0][0]):
        written[ident].append(state)
    # the workflow really went through what it claims
    kinds = {row[1] for row in logged}
    assert kinds == {"item", "item-added", "item-removed", "base", "base-removed"}
    assert any(s == "failed" and e == "interrupted by shutdown" for w in written.values() for s, _, e in w)
    assert any(e == "One or more child items failed" for w in written.values() for _, _, e in w)
    assert {i.status.value for i in remaining} >= {"completed", "failed"}
    for item_id, wanted in written.items():
        assert _is_subsequence(wanted, states[item_id]), (
            f"item {item_id}: states written {wanted}, published {states[item_id]}"
        )

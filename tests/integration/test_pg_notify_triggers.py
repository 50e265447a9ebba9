"""The catalogue's NOTIFY triggers on a real PostgreSQL: what each write sends, in which order.

Writes go through the data layer (as every ktui process makes them) on a connection with
an origin; a plain LISTEN connection collects the payloads (notify.NOTIFY_MIGRATION's
row triggers): one notification per row, in the statement's row order, updates only when
status, phase, error or data changed, cascaded deletes included, nothing for a
rolled-back write.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import sql

from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import ValidItem
from ktui.core.models import DirectoryItemData, FileItemData, ItemPhase, ItemStatus, ItemType, NoteItemData
from ktui.core.store.postgres.catalogue import PgDatabase
from ktui.core.store.postgres.notify import channel_for, with_origin

pytestmark = pytest.mark.timeout(120)

ORIGIN = "test-host:1:abcd"


class Heard:
    def __init__(self, url: str, schema: str):
        self.con = psycopg.connect(url, autocommit=True)
        self.con.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel_for(schema))))

    def take(self) -> list[dict]:
        """Everything delivered so far (a commit's notifications arrive with it)."""
        self.con.execute("SELECT 1")  # a round trip: notifications sent before it have arrived
        return [json.loads(n.payload) for n in self.con.notifies(timeout=0.2)]

    def close(self) -> None:
        self.con.close()


@pytest.fixture
async def world(postgres_server, pg_schema):
    db = await PgDatabase.open(with_origin(postgres_server.url, ORIGIN), schema=pg_schema)
    heard = Heard(postgres_server.url, pg_schema)
    try:
        yield db, heard
    finally:
        heard.close()
        await db.close()


def kinds(payloads: list[dict]) -> list[tuple[str, str | None]]:
    return [(p["k"], p.get("i")) for p in payloads]


async def test_each_row_of_a_statement_notifies_once_in_order(world):
    db, heard = world
    base = await BaseWrites(db).create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)
    items = ItemWrites(db)
    (root,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/d", "/d"))])
    sub = ChildSpec(ItemType.DIRECTORY, DirectoryItemData("/d/s", "/d/s"),
                    children=[ChildSpec(ItemType.FILE, FileItemData("/d/s/b.md", "/d/s/b.md"))])
    kids = await items.create_children(base.id, root.id, [ChildSpec(ItemType.FILE, FileItemData("/d/a.md", "/d/a.md")), sub])
    got = heard.take()
    assert got[0] == {"o": ORIGIN, "k": "bc", "b": base.id}
    assert kinds(got[1:]) == [("ia", root.id)] + [("ia", k.id) for k in kids]  # parents before children
    assert [p["g"] for p in got[1:]] == [None, root.id, root.id, kids[1].id]
    assert all(p["o"] == ORIGIN and p["b"] == base.id for p in got)

    async with db.transaction() as conn:  # one UPDATE of every child: the leaves change phase, the sub-folder not
        await conn.execute("UPDATE knowledge_item SET phase = CASE WHEN type = 'file' THEN 'reading' END "
                           "WHERE group_id IS NOT NULL", ())
    got = heard.take()
    assert sorted(kinds(got)) == sorted([("ic", kids[0].id), ("ic", kids[2].id)]), got
    await items.set_status_many([kids[0].id], ItemStatus.PROCESSING, ItemPhase.EMBEDDING)
    assert kinds(heard.take()) == [("ic", kids[0].id)]
    async with db.transaction() as conn:  # a write that changes none of status/phase/error/data
        await conn.execute("UPDATE knowledge_item SET updated_at = ? WHERE base_id = ?", ("2030-01-01", base.id))
    assert heard.take() == []

    await items.delete([root.id])  # the children go by the foreign key's cascade
    got = heard.take()
    assert sorted(kinds(got)) == sorted([("ir", root.id)] + [("ir", k.id) for k in kids])


async def test_a_rolled_back_write_sends_nothing_and_base_deletes_cascade(world):
    db, heard = world
    base = await BaseWrites(db).create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)
    items = ItemWrites(db)
    (note,) = await items.create_roots(base.id, [ValidItem(ItemType.NOTE, NoteItemData("hello", "note"))])
    heard.take()
    with pytest.raises(RuntimeError):
        async with db.transaction() as conn:
            await conn.execute("UPDATE knowledge_item SET status = 'completed', phase = NULL WHERE id = ?", (note.id,))
            raise RuntimeError("roll back")
    assert heard.take() == []
    await BaseWrites(db).delete(base.id)
    assert sorted(kinds(heard.take())) == sorted([("br", None), ("ir", note.id)])


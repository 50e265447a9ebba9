"""`ktui doctor`: check every file of a data directory, and with `repair` fix what can be fixed.

What is checked, and what `repair` does about it:

| check | repair |
|---|---|
| `knowledge.db` passes `PRAGMA quick_check` | nothing (export what is readable, import into a new directory) |
| each usable base's store file exists and opens | a forced reindex of the base (a damaged file is kept as `*.corrupt-<time>`) |
| the store passes `PRAGMA integrity_check` | the file is set aside and the base rebuilt from its sources |
| vectors, FTS index and chunk rows agree (`BaseStore.check_invariants`) | the derived vector files are deleted (rebuilt from the rows) |
| every chunk belongs to a leaf item of its base | the stray chunks are deleted |
| files under `bases/` that belong to no base | deleted (leftovers of a killed create or delete) |
| items `processing` that nothing is working on (SQLite only: on a shared PostgreSQL store another process may be) | queued again |

Every finding is reported whether or not it was repaired; the report says what was done.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ktui.core.errors import KnowledgeError, StoreDamagedError, StoreError
from ktui.core.models import CONTAINER_TYPES, ItemPhase, ItemStatus, KnowledgeBase

if TYPE_CHECKING:
    from ktui.core.catalogue import Catalogue
    from ktui.core.data.base_service import KnowledgeBaseService
    from ktui.core.data.item_service import KnowledgeItemService
    from ktui.core.orchestration import KnowledgeOrchestrationService
    from ktui.core.runtime.service import KnowledgeRuntimeService


@dataclass(frozen=True, slots=True)
class DoctorFinding:
    """One problem: where (`subject`: a file or a base), what is wrong, what was done."""

    subject: str
    problem: str
    action: str | None = None  # what repair did (or would do, when not repairing)
    repaired: bool = False


@dataclass(slots=True)
class DoctorReport:
    repair: bool
    checked: list[str] = field(default_factory=list)  # what was looked at (files and bases)
    findings: list[DoctorFinding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.findings

    @property
    def unresolved(self) -> list[DoctorFinding]:
        return [f for f in self.findings if not f.repaired]


class Doctor:
    def __init__(self, db: Catalogue, bases: KnowledgeBaseService, items: KnowledgeItemService,
                 runtime: KnowledgeRuntimeService, workflow: KnowledgeOrchestrationService):
        self.db, self.bases, self.items, self.runtime, self.workflow = db, bases, items, runtime, workflow

    async def run(self, repair: bool) -> DoctorReport:
        report = DoctorReport(repair)
        await self._catalogue(report)
        all_bases = await self.bases.list_all()
        for base in all_bases:
            if base.is_usable:
                await self._base(report, base)
        await self._stray_files(report, {b.id for b in all_bases})
        await self._stuck_items(report)
        return report

    def _note(self, report: DoctorReport, subject: str, problem: str, action: str, done: bool) -> None:
        report.findings.append(DoctorFinding(subject, problem, action if done else f"repair would: {action}", done))

    async def _catalogue(self, report: DoctorReport) -> None:
        report.checked.append(self.db.where)
        if self.db.dialect.name != "sqlite":  # PostgreSQL checks its own pages; the doctor checks it answers
            try:
                await self.db.fetchall("SELECT count(*) FROM knowledge_base")
            except Exception as exc:  # noqa: BLE001 - a check never crashes the doctor
                report.findings.append(DoctorFinding(self.db.where, f"the catalogue cannot be read: {exc}",
                                                     "fix the cause (the server, the schema's rights), then run doctor again"))
            return
        try:
            rows = [str(r[0]) for r in await self.db.fetchall("PRAGMA quick_check(20)")]
        except Exception as exc:  # noqa: BLE001 - a check never crashes the doctor
            rows = [str(exc)]
        if rows != ["ok"]:
            report.findings.append(DoctorFinding(
                self.db.where, "the catalogue fails its integrity check: " + "; ".join(rows),
                "not repairable in place: export what is readable (`ktui base export --all`) and import it "
                "into a new data directory",
            ))

    async def _base(self, report: DoctorReport, base: KnowledgeBase) -> None:
        stores = self.runtime.stores
        path = stores.where_of(base.id)
        report.checked.append(path)
        try:
            store = await self.runtime.store(base)
            damage = await asyncio.to_thread(store.integrity_check)
            if damage:
                raise StoreDamagedError(path, "is corrupt: " + "; ".join(damage[:3]))
        except StoreDamagedError as exc:
            if report.repair and not exc.kept and stores.exists(base.id):
                await asyncio.to_thread(stores.set_aside, base.id, exc.reason)
            await self._rebuild(report, base, path, exc.reason)
            return
        except StoreError as exc:  # permission, disk: say it, touch nothing
            report.findings.append(DoctorFinding(path, str(exc), "fix the cause, then run doctor again"))
            return
        problems = await asyncio.to_thread(store.check_invariants)
        matrix = [p for p in problems if "matrix" in p]
        others = [p for p in problems if "matrix" not in p]
        if matrix:
            if report.repair:
                async with self.runtime.lock(base.id):
                    await asyncio.to_thread(stores.drop_matrix, base.id)
            self._note(report, path, "vector files out of step with the rows: " + matrix[0],
                       "deleted the vector files; they are rebuilt from the rows", report.repair)
        if others:
            await self._rebuild(report, base, path, "; ".join(others[:3]))
            return
        leaves = {i.id for i in await self.items.list_all(base.id) if i.type not in CONTAINER_TYPES}
        store = await self.runtime.store(base)
        strays = sorted(await asyncio.to_thread(store.item_ids) - leaves)
        if strays:
            if report.repair:
                async with self.runtime.lock(base.id):
                    await asyncio.to_thread(store.delete_items, strays)
            self._note(report, path, f"chunks of {len(strays)} item(s) that are not in base {base.name}",
                       "deleted those chunks", report.repair)

    async def _rebuild(self, report: DoctorReport, base: KnowledgeBase, path: str, why: str) -> None:
        done = False
        if report.repair:
            roots = await self.items.list_all(base.id, roots_only=True)
            try:
                await self.workflow.reindex_items(base.id, [r.id for r in roots], force=True)
                done = True
            except KnowledgeError as exc:
                why += f" (the rebuild could not start: {exc})"
        self._note(report, path, f"base {base.name}: store {why}",
                   f"rebuilding base {base.name} from its sources (a damaged file is kept as *.corrupt-<time>)",
                   done)

    async def _stray_files(self, report: DoctorReport, known: set[str]) -> None:
        stray = await asyncio.to_thread(self.runtime.stores.stray_files, known)
        for path in stray:
            done = False
            if report.repair:
                try:
                    await asyncio.to_thread(path.unlink)
                    done = True
                except OSError:
                    pass
            self._note(report, str(path), "belongs to no base (left by an interrupted create or delete)",
                       "deleted it", done)

    async def _stuck_items(self, report: DoctorReport) -> None:
        if self.db.dialect.name != "sqlite":
            # a shared store: another process may be working on any `processing` item; what
            # nobody holds a lease on, the running processes' lease sweep re-queues
            # (core/store/postgres/work_claims.py): neither report nor re-queue here
            return
        await self.runtime.recovery.wait()  # a holder's recovery re-queues what it finds: not a finding
        queue = self.runtime.queue
        stuck = [
            i for i in await self.items.by_status([ItemStatus.PROCESSING])
            if not queue.is_active(i.id) and (i.type not in CONTAINER_TYPES or i.phase == ItemPhase.PREPARING)
        ]
        if not stuck:
            return
        if report.repair:
            await self.runtime.recover()
        for item in stuck:
            self._note(report, f"item {item.id} ({item.source})", "processing, but nothing is working on it",
                       "queued it again", report.repair)

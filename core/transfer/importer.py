"""Creating the planned bases through the data services and the workflow."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ktui.core.data.imports import ImportLedger, fingerprint
from ktui.core.data.item_validation import validate_item_input
from ktui.core.data.validation import MAX_INPUTS_PER_CALL, ValidItem
from ktui.core.errors import KnowledgeError, ProviderError, ValidationError
from ktui.core.models import (
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemStatus,
    KnowledgeItem,
    NoteItemData,
)
from ktui.core.transfer.cleaning import structural_item
from ktui.core.transfer.reports import BaseImportReport, BasePlan, ImportReport, ParsedDocument

log = logging.getLogger(__name__)


# --- creating the bases ---------------------------------------------------


@dataclass(slots=True)
class ModelCheck:
    available: bool
    dimensions: int | None = None
    reason: str | None = None


class Importer:
    """Create the planned bases through the data services and the workflow.

    Collaborators are passed in (the facade owns them) so that this module holds
    the logic and the facade stays a thin list of methods.
    """

    def __init__(self, *, bases: Any, state: Any, workflow: Any, embeddings: Any,
                 ledger: ImportLedger, again: bool = False, catalogue: Any = None, stores: Any = None,
                 bus: Any = None):
        self.bases = bases  # reads
        self.state = state  # writes, each with its event (ktui.core.runtime.status.StateWriter)
        self.workflow = workflow
        self.embeddings = embeddings
        self.ledger = ledger  # all-or-nothing and repeats (ktui.core.data.imports)
        self.again = again  # import a base even when the same content was imported before
        self.catalogue = catalogue  # with stores: where a document's index (vectors) is restored
        self.stores = stores
        self.bus = bus  # told to reload after an index was restored (its rows bypass the state writer's events)
        self._models: dict[str, ModelCheck] = {}
        self._groups: dict[str, str] | None = None

    async def run(self, parsed: ParsedDocument) -> ImportReport:
        report = ImportReport(parsed.format, skipped_bases=list(parsed.skipped_bases))
        for plan in parsed.plans:
            try:
                await self._import_base(plan)
            except KnowledgeError as exc:
                plan.report.status = "error"
                plan.report.reason = str(exc)
                plan.report.base_id = None
                plan.report.item_ids = []
                plan.report.kept = 0
            report.bases.append(plan.report)
        return report

    async def check_model(self, model_id: str | None) -> ModelCheck:
        """Is the embedding model usable here? Probes it once per import."""
        if model_id is None:
            return ModelCheck(False, reason="the document names no embedding model")
        if model_id in self._models:
            return self._models[model_id]
        provider = model_id.split("::", 1)[0]
        if not self.embeddings.has_model_provider(model_id):
            check = ModelCheck(False, reason=f"provider '{provider}' is not configured here")
        else:
            config, _ = self.embeddings.parse_model_id(model_id)
            if config.kind not in ("builtin", "ollama", "openai"):
                check = ModelCheck(False, reason=f"provider '{provider}' cannot embed (kind {config.kind})")
            else:
                try:
                    dims = await self.embeddings.detect_dimensions(model_id)
                    check = ModelCheck(True, dims)
                except ProviderError as exc:
                    check = ModelCheck(False, reason=f"model '{model_id}' is not usable here: {exc}")
        self._models[model_id] = check
        return check

    def _rerank_usable(self, model_id: str) -> bool:
        if "::" not in model_id:
            return False
        try:
            self.embeddings.check_rerank_model(model_id)  # the rule create and update apply
        except ValidationError:
            return False
        return True

    async def _group_id(self, name: str) -> str:
        if self._groups is None:  # group names are unique regardless of case
            self._groups = {g.name.casefold(): g.id for g in await self.bases.list_groups()}
        key = name.casefold()
        if key not in self._groups:
            group = await self.state.create_group(name)
            self._groups[key] = group.id
        return self._groups[key]

    async def _import_base(self, plan: BasePlan) -> None:
        report = plan.report
        digest = plan_fingerprint(plan)
        if not self.again:
            earlier = await self.ledger.imported_as(digest)
            if earlier is not None:
                try:
                    base = await self.bases.get(earlier)
                except KnowledgeError:
                    base = None
                if base is not None:
                    report.status = "duplicate"
                    report.base_id = base.id
                    # front-end neutral: the CLI/TUI/MCP say how to ask for a second copy
                    report.reason = (f"already imported as base '{base.name}' ({base.id}) "
                                     "(import it again to make a second copy)")
                    return
        plan.fingerprint = digest
        config = dict(plan.config)
        rerank = config.get("rerank_model_id")
        if rerank and not self._rerank_usable(rerank):
            report.warnings.append(f"rerank model '{rerank}' is not available here; cleared")
            config["rerank_model_id"] = None
        if plan.group_name:
            config["group_id"] = await self._group_id(plan.group_name)
        check = await self.check_model(plan.embedding_model_id)
        if check.available:
            await self._import_runnable(plan, config, check)
        else:
            await self._import_failed(plan, config, check)

    async def _import_runnable(self, plan: BasePlan, config: dict[str, Any], check: ModelCheck) -> None:
        report = plan.report
        assert plan.embedding_model_id is not None and check.dimensions is not None
        if plan.dimensions is not None and plan.dimensions != check.dimensions:
            report.warnings.append(
                f"dimensions {plan.dimensions} in the document differ from the model's {check.dimensions} "
                "here; using the model's"
            )
        if plan.index is not None:
            from ktui.core.transfer.vectors import index_problem

            problem = "this ktui cannot restore it here" if self.catalogue is None else index_problem(
                plan.index, check.dimensions)
            if problem is None:
                await self._import_indexed(plan, config, check)
                return
            report.warnings.append(f"the document's vectors are not used ({problem}); the items are indexed again")
        accepted: list[ItemInput] = []
        for item in plan.items:
            try:
                valid = validate_item_input(ItemInput(item.type, item.data), item.label)
            except ValidationError as exc:
                report.skip(item.label, _why_not_addable(exc))
                continue
            accepted.append(_as_input(valid))
        base = await self.workflow.create_base(plan.name, plan.embedding_model_id, check.dimensions,
                                               free_name=True, import_fingerprint=plan.fingerprint, **config)
        report.base_id = base.id
        report.status = "completed"
        report.embedding_model_id = base.embedding_model_id
        report.dimensions = base.dimensions
        await self._fill(base.id, report, accepted, MAX_INPUTS_PER_CALL,
                         lambda part: self.workflow.add_items(base.id, part))

    async def _import_indexed(self, plan: BasePlan, config: dict[str, Any], check: ModelCheck) -> None:
        """A base whose document carries its index for this model and width: every item and
        chunk is restored with its vector; nothing is queued or embedded."""
        import asyncio

        from ktui.core.models import Resync
        from ktui.core.transfer.vectors import restore_index

        report = plan.report
        base = await self.workflow.create_base(plan.name, plan.embedding_model_id, check.dimensions,
                                               free_name=True, import_fingerprint=plan.fingerprint, **config)
        report.base_id, report.status = base.id, "completed"
        report.embedding_model_id, report.dimensions = base.embedding_model_id, base.dimensions
        try:
            store = await asyncio.to_thread(self.stores.get, base.id, base.dimensions)
            roots, chunks = await restore_index(self.catalogue, store, base.id, plan.index)
            await self.ledger.finish(base.id)
        except BaseException:
            await self._discard(base.id)
            raise
        report.item_ids, report.kept, report.vectors = roots, len(roots), chunks
        if self.bus is not None:
            self.bus.publish(Resync(f"base '{base.name}' was imported with its index"))

    async def _import_failed(self, plan: BasePlan, config: dict[str, Any], check: ModelCheck) -> None:
        report = plan.report
        valid = [structural_item(item.type, item.data, item.label) for item in plan.items]
        base = await self.state.create_failed_base(name=plan.name, dimensions=plan.dimensions, config=config,
                                                   import_fingerprint=plan.fingerprint)
        report.base_id = base.id
        report.status = "failed"
        report.reason = check.reason
        report.dimensions = base.dimensions
        await self._fill(base.id, report, valid, 500,
                         lambda part: self.state.create_roots(base.id, part, status=ItemStatus.IDLE))

    async def _fill(self, base_id: str, report: BaseImportReport, items: Sequence[Any], size: int,
                    create: Callable[[Sequence[Any]], Awaitable[Sequence[KnowledgeItem]]]) -> None:
        """Create a new base's items, `size` at a time; if anything fails the base goes too."""
        try:
            for start in range(0, len(items), size):
                created = await create(items[start : start + size])
                report.item_ids.extend(i.id for i in created)
            await self.ledger.finish(base_id)
        except BaseException:
            await self._discard(base_id)
            raise
        report.kept = len(report.item_ids)

    async def _discard(self, base_id: str) -> None:
        try:
            await self.workflow.delete_base(base_id)
        except KnowledgeError:  # best effort: the original error is what the user needs
            log.exception("could not delete the partially imported base %s", base_id)


def plan_fingerprint(plan: BasePlan) -> str:
    """What makes two imports "the same base": its name, model, settings, group and items."""
    return fingerprint({
        "name": plan.name, "model": plan.embedding_model_id, "dimensions": plan.dimensions,
        "config": plan.config, "group": plan.group_name,
        "items": [[str(item.type), item.data] for item in plan.items],
    })


def _as_input(valid: ValidItem) -> ItemInput:
    data = valid.data
    payload: dict[str, Any]
    if isinstance(data, NoteItemData):
        payload = {"content": data.content}
        if data.source_url:
            payload["source_url"] = data.source_url
    elif isinstance(data, DirectoryItemData):
        payload = {"path": data.path, "watch": data.watch}
    elif isinstance(data, FileItemData):
        payload = {"path": data.path}
    else:
        payload = {"url": data.url}
    return ItemInput(valid.type, payload)


def _why_not_addable(exc: ValidationError) -> str:
    message = next(iter(exc.errors.values()), str(exc))
    if "does not exist" in message:
        return f"path {message} on this machine (a runnable base can only index existing paths)"
    return message

"""BaseWrites: every write of the base and group tables.

No vector-store side effects here (the orchestration layer owns those); the one
hook, `before_commit`, lets the caller create the base's store inside the row's
transaction so that a failure rolls the row back.

Only :class:`ktui.core.runtime.status.StateWriter` uses this module (an
import-linter contract says so): it publishes the event of each write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ktui.core.catalogue import AsyncConn
from ktui.core.data.base_service import KnowledgeBaseService
from ktui.core.data.base_validation import (
    BASE_PATCHABLE,
    check_base_consistency,
    unknown_field,
    validate_base_field,
    validate_base_patch,
)
from ktui.core.data.imports import record_import_start
from ktui.core.data.rows import BASE_COLUMNS, group_from_row
from ktui.core.data.validation import (
    MAX_NAME_CHARS,
    require_dimensions,
    require_id,
    require_model_id,
    require_name,
)
from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.ids import new_id, utc_now
from ktui.core.models import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_EMOJI,
    DEFAULT_HYBRID_ALPHA,
    BaseStatus,
    KnowledgeBase,
    KnowledgeBaseErrorCode,
    KnowledgeGroup,
    SearchMode,
)

BeforeCommit = Callable[[KnowledgeBase], Awaitable[None]]


def base_config(config: dict[str, Any], *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                chunk_overlap: int = DEFAULT_CHUNK_OVERLAP, search_mode: SearchMode = SearchMode.HYBRID,
                hybrid_alpha: float = DEFAULT_HYBRID_ALPHA) -> dict[str, Any]:
    """Validate a new base's configuration and fill the defaults.

    The defaults come from the caller (the model's profile: a chunk size that fits
    its input window, its recommended mode and alpha). `hybrid_alpha` defaults to
    `hybrid_alpha` in hybrid mode and is absent otherwise.
    """
    if not isinstance(config, dict):
        raise ValidationError.field("config", "must be a mapping")
    unknown = [k for k in config if k not in BASE_PATCHABLE or k == "name"]
    if unknown:
        raise unknown_field(unknown[0], "unknown base setting", "config")
    cfg: dict[str, Any] = {
        "emoji": DEFAULT_EMOJI,
        "group_id": None,
        "rerank_model_id": None,
        "chunk_size": chunk_size,
        "chunk_overlap": min(chunk_overlap, chunk_size - 1),
        "threshold": None,
        "document_count": None,
        "search_mode": search_mode,
        "hybrid_alpha": None,
        "ocr_enabled": None,
        "ocr_languages": None,
        "ocr_max_pages": None,
    }
    if "chunk_size" in config and "chunk_overlap" not in config:
        size = validate_base_field("chunk_size", config["chunk_size"])
        cfg["chunk_overlap"] = min(chunk_overlap, size - 1)
    for key, value in config.items():
        cfg[key] = validate_base_field(key, value)
    if cfg["search_mode"] == SearchMode.HYBRID and cfg["hybrid_alpha"] is None:
        cfg["hybrid_alpha"] = hybrid_alpha
    check_base_consistency(cfg)
    return cfg


class BaseWrites(KnowledgeBaseService):
    """The base and group tables' writes (and, inherited, their reads)."""

    # --- bases ------------------------------------------------------------

    async def create(
        self,
        *,
        name: Any,
        embedding_model_id: Any,
        dimensions: Any,
        config: dict[str, Any] | None = None,
        before_commit: BeforeCommit | None = None,
        defaults: dict[str, Any] | None = None,
        free_name: bool = False,
        group_name: Any = None,
        import_fingerprint: str | None = None,
    ) -> KnowledgeBase:
        """Insert a completed (runnable) base. Names are unique ignoring case (like group
        names: the CLI and exports name bases); `free_name` picks "NAME (2)"… instead of
        refusing a taken one (restore, import).

        `group_name` puts it in the group of that name, created in the same
        transaction when there is none: a refused base never leaves a new group behind.
        `import_fingerprint` marks it as being imported (`ktui.core.data.imports`), in the
        same transaction, so a kill between the two cannot leave an unmarked empty base."""
        clean_name = require_name(name)
        model = require_model_id(embedding_model_id)
        dims = require_dimensions(dimensions)
        cfg = base_config(config or {}, **(defaults or {}))
        group = _group_name(group_name, cfg.get("group_id"))
        return await self._insert(clean_name, model, dims, BaseStatus.COMPLETED, None, cfg, before_commit,
                                  free_name=free_name, group_name=group, import_fingerprint=import_fingerprint)

    async def create_failed(
        self,
        *,
        name: Any,
        dimensions: Any,
        error: KnowledgeBaseErrorCode = KnowledgeBaseErrorCode.MISSING_EMBEDDING_MODEL,
        config: dict[str, Any] | None = None,
        free_name: bool = True,
        import_fingerprint: str | None = None,
    ) -> KnowledgeBase:
        """Insert a recoverable failed base (its embedding model is unknown here)."""
        clean_name = require_name(name)
        dims = None
        if dimensions is not None:
            try:
                dims = require_dimensions(dimensions)
            except ValidationError:
                dims = None  # unknown width is allowed for a failed base
        cfg = base_config(config or {})
        return await self._insert(clean_name, None, dims, BaseStatus.FAILED, error, cfg, None, free_name=free_name,
                                  import_fingerprint=import_fingerprint)

    async def _insert(self, name: str, model: str | None, dims: int | None, status: BaseStatus,
                      error: KnowledgeBaseErrorCode | None, cfg: dict[str, Any],
                      before_commit: BeforeCommit | None, *, free_name: bool = False,
                      group_name: str | None = None, import_fingerprint: str | None = None) -> KnowledgeBase:
        base_id = new_id()
        now = utc_now()
        async with self._db.transaction() as conn:
            name = await _free_base_name(conn, name) if free_name else await _refuse_taken_base_name(conn, name)
            if group_name is not None:
                cfg = {**cfg, "group_id": await self._group_named(conn, group_name, now)}
            elif cfg["group_id"] is not None:
                await self._require_group(conn, cfg["group_id"])
            await conn.execute(
                f"INSERT INTO knowledge_base ({BASE_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    base_id, name, cfg["group_id"], cfg["emoji"], dims, model, status.value,
                    error.value if error else None, cfg["rerank_model_id"], cfg["chunk_size"],
                    cfg["chunk_overlap"], cfg["threshold"], cfg["document_count"],
                    cfg["search_mode"].value, cfg["hybrid_alpha"], now, now,
                    cfg["ocr_enabled"], cfg["ocr_languages"], cfg["ocr_max_pages"],
                ),
            )
            if import_fingerprint is not None:
                await record_import_start(conn, base_id, import_fingerprint)
            base = await self._get(conn, base_id)
            if before_commit is not None:
                await before_commit(base)
        return base

    async def update(self, base_id: Any, patch: Any) -> KnowledgeBase:
        """Patch configuration. The model and dimensions are immutable (restore instead).

        A `group_name` key moves the base into the group of that name, created in the
        same transaction when there is none (so a refused patch creates no group)."""
        base_id = require_id(base_id, "base_id")
        group_name = None
        if isinstance(patch, Mapping) and "group_name" in patch:
            patch = dict(patch)
            group_name = _group_name(patch.pop("group_name"), patch.get("group_id"))
        clean = validate_base_patch(patch) if patch or group_name is None else {}
        async with self._db.transaction() as conn:
            if group_name is not None:
                clean["group_id"] = await self._group_named(conn, group_name, utc_now())
            current = await self._get(conn, base_id)
            merged = {key: getattr(current, key) for key in BASE_PATCHABLE}
            merged.update(clean)
            if "search_mode" in clean:
                if merged["search_mode"] != SearchMode.HYBRID:
                    if clean.get("hybrid_alpha") is not None:
                        raise ValidationError.field("hybrid_alpha", "only applies when search_mode is 'hybrid'")
                    merged["hybrid_alpha"] = None
                elif merged["hybrid_alpha"] is None:
                    merged["hybrid_alpha"] = DEFAULT_HYBRID_ALPHA
            check_base_consistency(merged)
            if clean.get("group_id") is not None:
                await self._require_group(conn, clean["group_id"])
            if "name" in clean:
                await _refuse_taken_base_name(conn, clean["name"], base_id)
            assignments = ", ".join(f"{key} = ?" for key in BASE_PATCHABLE)
            values = [merged[key].value if isinstance(merged[key], SearchMode) else merged[key] for key in BASE_PATCHABLE]
            await conn.execute(
                f"UPDATE knowledge_base SET {assignments}, updated_at = ? WHERE id = ?",
                (*values, utc_now(), base_id),
            )
            return await self._get(conn, base_id)

    async def delete(self, base_id: Any) -> None:
        base_id = require_id(base_id, "base_id")
        async with self._db.transaction() as conn:
            cur = await conn.execute("DELETE FROM knowledge_base WHERE id = ?", (base_id,))
            if cur.rowcount == 0:
                raise NotFoundError("Knowledge base", base_id)

    # --- groups -----------------------------------------------------------

    async def create_group(self, name: Any) -> KnowledgeGroup:
        """Group names are unique (case-insensitively): bases, the CLI and exports name
        their group, and two groups of one name could not be told apart."""
        clean = require_name(name)
        group_id, now = new_id(), utc_now()
        async with self._db.transaction() as conn:
            await _refuse_taken_group_name(conn, clean)
            await conn.execute(
                "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (group_id, clean, now, now),
            )
        return KnowledgeGroup(group_id, clean, now, now)

    async def rename_group(self, group_id: Any, name: Any) -> KnowledgeGroup:
        group_id = require_id(group_id, "group_id")
        clean = require_name(name)
        async with self._db.transaction() as conn:
            await _refuse_taken_group_name(conn, clean, group_id)
            cur = await conn.execute(
                "UPDATE knowledge_group SET name = ?, updated_at = ? WHERE id = ?", (clean, utc_now(), group_id)
            )
            if cur.rowcount == 0:
                raise NotFoundError("Group", group_id)
            async with conn.execute("SELECT * FROM knowledge_group WHERE id = ?", (group_id,)) as c:
                return group_from_row(await c.fetchone())

    async def delete_group(self, group_id: Any) -> None:
        """Deleting a group ungroups its bases (ON DELETE SET NULL); the bases stay."""
        group_id = require_id(group_id, "group_id")
        async with self._db.transaction() as conn:
            cur = await conn.execute("DELETE FROM knowledge_group WHERE id = ?", (group_id,))
            if cur.rowcount == 0:
                raise NotFoundError("Group", group_id)

    async def _group_named(self, conn: AsyncConn, name: str, now: str) -> str:
        """The id of the group called `name` (case-insensitive, like the uniqueness
        rule), inserted on this transaction when there is none."""
        async with conn.execute("SELECT id FROM knowledge_group WHERE lower(name) = lower(?)", (name,)) as cur:
            row = await cur.fetchone()
        if row is not None:
            return str(row[0])
        group_id = new_id()
        await conn.execute(
            "INSERT INTO knowledge_group (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (group_id, name, now, now),
        )
        return group_id


def _group_name(raw: Any, group_id: Any) -> str | None:
    """A validated `group_name` (None when absent); naming a group both ways is refused."""
    if raw is None:
        return None
    if group_id is not None:
        raise ValidationError.field("group_name", "give group_id or group_name, not both")
    return require_name(raw, "group_name")


async def _taken_base_names(conn: Any, name: str, own_id: str | None = None) -> list[str]:
    rows = await conn.execute_fetchall(
        "SELECT name FROM knowledge_base WHERE lower(name) = lower(?) AND id <> ?", (name, own_id or "")
    )
    # SQLite's lower() folds ASCII only; casefold() catches "Ä" / "ä" too (an id is never "")
    more = await conn.execute_fetchall("SELECT name FROM knowledge_base WHERE id <> ?", (own_id or "",)) \
        if not name.isascii() else []
    return [r[0] for r in rows] + [r[0] for r in more if r[0].casefold() == name.casefold()]


async def _refuse_taken_base_name(conn: Any, name: str, own_id: str | None = None) -> str:
    taken = await _taken_base_names(conn, name, own_id)
    if taken:
        raise ValidationError.field("name", f"a base named '{taken[0]}' already exists (names ignore case)")
    return name


async def _free_base_name(conn: Any, name: str) -> str:
    """`name`, or "name (2)", "name (3)"… — the first one no base has (ignoring case)."""
    candidate, n = name, 1
    while await _taken_base_names(conn, candidate):
        n += 1
        suffix = f" ({n})"
        candidate = name[: max(1, MAX_NAME_CHARS - len(suffix))] + suffix
    return candidate


async def _refuse_taken_group_name(conn: Any, name: str, own_id: str | None = None) -> None:
    async with conn.execute(
        "SELECT name FROM knowledge_group WHERE lower(name) = lower(?) AND id <> ?", (name, own_id or "")
    ) as cur:
        taken = await cur.fetchone()
    if taken is not None:
        raise ValidationError.field("name", f"a group named '{taken[0]}' already exists")

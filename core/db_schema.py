"""The catalogue's schema: numbered migrations, applied in order by `Database` (core/db.py).

`PRAGMA user_version` records the last one applied. Append a migration to change the
schema; never edit an old one (a database already past it would never see the change).
"""

from __future__ import annotations

from collections.abc import Sequence

_SCHEMA_V1 = """
CREATE TABLE knowledge_group (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL CHECK (length(trim(name)) > 0),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE knowledge_base (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL CHECK (length(trim(name)) > 0),
    group_id            TEXT REFERENCES knowledge_group(id) ON DELETE SET NULL,
    emoji               TEXT NOT NULL DEFAULT '📁' CHECK (length(emoji) > 0),
    dimensions          INTEGER CHECK (dimensions IS NULL OR dimensions > 0),
    embedding_model_id  TEXT CHECK (embedding_model_id IS NULL OR instr(embedding_model_id, '::') > 1),
    status              TEXT NOT NULL DEFAULT 'completed' CHECK (status IN ('completed', 'failed')),
    error               TEXT CHECK (error IS NULL OR error IN ('missing_embedding_model')),
    rerank_model_id     TEXT,
    chunk_size          INTEGER NOT NULL DEFAULT 1024 CHECK (chunk_size > 0),
    chunk_overlap       INTEGER NOT NULL DEFAULT 200 CHECK (chunk_overlap >= 0 AND chunk_overlap < chunk_size),
    threshold           REAL CHECK (threshold IS NULL OR (threshold >= 0 AND threshold <= 1)),
    document_count      INTEGER CHECK (document_count IS NULL OR document_count > 0),
    search_mode         TEXT NOT NULL DEFAULT 'hybrid' CHECK (search_mode IN ('default', 'bm25', 'hybrid')),
    hybrid_alpha        REAL CHECK (hybrid_alpha IS NULL OR (hybrid_alpha >= 0 AND hybrid_alpha <= 1)),
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    -- a runnable base has a model and a width; a failed one says why
    CHECK (
        (status = 'completed' AND error IS NULL AND embedding_model_id IS NOT NULL AND dimensions IS NOT NULL)
        OR (status = 'failed' AND error IS NOT NULL)
    ),
    -- a missing model is recorded as no model at all
    CHECK (error IS NULL OR error <> 'missing_embedding_model' OR embedding_model_id IS NULL),
    CHECK (hybrid_alpha IS NULL OR search_mode = 'hybrid')
);
CREATE INDEX idx_base_created ON knowledge_base (created_at DESC, id DESC);
CREATE INDEX idx_base_group ON knowledge_base (group_id);

CREATE TABLE knowledge_item (
    id          TEXT PRIMARY KEY,
    base_id     TEXT NOT NULL REFERENCES knowledge_base(id) ON DELETE CASCADE,
    group_id    TEXT,
    type        TEXT NOT NULL CHECK (type IN ('file', 'url', 'note', 'directory', 'sitemap')),
    data        TEXT NOT NULL CHECK (json_valid(data)),
    status      TEXT NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'processing', 'completed', 'failed')),
    phase       TEXT CHECK (phase IS NULL OR phase IN ('preparing', 'reading', 'embedding')),
    error       TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (base_id, id),
    FOREIGN KEY (base_id, group_id) REFERENCES knowledge_item (base_id, id) ON DELETE CASCADE,
    CHECK (group_id IS NULL OR group_id <> id),
    CHECK (
        (status IN ('idle', 'completed') AND phase IS NULL AND error IS NULL)
        OR (status = 'processing' AND error IS NULL)
        OR (status = 'failed' AND phase IS NULL AND error IS NOT NULL AND length(trim(error)) > 0)
    ),
    CHECK (
        phase IS NULL
        OR (phase = 'preparing' AND type IN ('directory', 'sitemap'))
        OR (phase IN ('reading', 'embedding') AND type IN ('file', 'url', 'note'))
    )
);
CREATE INDEX idx_item_base_group ON knowledge_item (base_id, group_id, created_at DESC, id DESC);
CREATE INDEX idx_item_group_status ON knowledge_item (group_id, status);
CREATE INDEX idx_item_status ON knowledge_item (status);

-- only directory and sitemap items may own children
CREATE TRIGGER item_owner_is_container_insert
BEFORE INSERT ON knowledge_item
WHEN NEW.group_id IS NOT NULL
 AND (SELECT type FROM knowledge_item WHERE id = NEW.group_id) NOT IN ('directory', 'sitemap')
BEGIN
    SELECT RAISE(ABORT, 'group owner must be a directory or sitemap item');
END;

CREATE TRIGGER item_owner_is_container_update
BEFORE UPDATE OF group_id ON knowledge_item
WHEN NEW.group_id IS NOT NULL
 AND (SELECT type FROM knowledge_item WHERE id = NEW.group_id) NOT IN ('directory', 'sitemap')
BEGIN
    SELECT RAISE(ABORT, 'group owner must be a directory or sitemap item');
END;
"""

_SCHEMA_V2 = """
-- v1 checked the owner's type when a child is inserted or moved, but a container
-- that already has children could still be turned into a leaf. An item's type is
-- fixed at creation (its data and phases depend on it), so refuse any change.
CREATE TRIGGER item_type_is_immutable
BEFORE UPDATE OF type ON knowledge_item
WHEN NEW.type IS NOT OLD.type
BEGIN
    SELECT RAISE(ABORT, 'an item''s type cannot change');
END;
"""

_SCHEMA_V3 = """
-- per-base OCR choices; NULL follows the settings file's [ocr] table
ALTER TABLE knowledge_base ADD COLUMN ocr_enabled INTEGER CHECK (ocr_enabled IS NULL OR ocr_enabled IN (0, 1));
ALTER TABLE knowledge_base ADD COLUMN ocr_languages TEXT CHECK (ocr_languages IS NULL OR length(ocr_languages) > 0);
ALTER TABLE knowledge_base ADD COLUMN ocr_max_pages INTEGER CHECK (ocr_max_pages IS NULL OR ocr_max_pages > 0);
"""

_SCHEMA_V4 = """
-- imports (core/data/imports.py): a base is 'importing' until all its items are in,
-- so a kill mid-import leaves a row that the next writable open discards with its
-- base; the fingerprint of what was imported tells a second import of the same base
CREATE TABLE base_import (
    base_id      TEXT PRIMARY KEY REFERENCES knowledge_base(id) ON DELETE CASCADE,
    fingerprint  TEXT NOT NULL CHECK (length(fingerprint) = 64),
    state        TEXT NOT NULL CHECK (state IN ('importing', 'done')),
    created_at   TEXT NOT NULL
);
CREATE INDEX idx_base_import_fingerprint ON base_import (fingerprint);
"""

_SCHEMA_V5 = """
-- listing every level of a base (list_items_after with ANY_GROUP) walks the base's
-- items in (created_at, id) order from a cursor; idx_item_base_group has group_id
-- between the base and the time, so that order needed a sort of the whole base per page
CREATE INDEX idx_item_base_created ON knowledge_item (base_id, created_at DESC, id DESC);
"""

MIGRATIONS: Sequence[str] = (_SCHEMA_V1, _SCHEMA_V2, _SCHEMA_V3, _SCHEMA_V4, _SCHEMA_V5)
"""MIGRATIONS[n] brings a database from user_version n to n + 1. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)


def split_script(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (BEGIN … END;) whole.

    executescript() would commit our transaction first; splitting keeps each
    migration atomic with its user_version bump.
    """
    statements: list[str] = []
    buf: list[str] = []
    depth = 0
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        buf.append(line)
        upper = stripped.upper()
        if upper == "BEGIN" or upper.endswith(" BEGIN"):
            depth += 1
        if stripped.endswith(";"):
            if depth and upper == "END;":
                depth -= 1
            if depth == 0:
                statements.append("\n".join(buf))
                buf = []
    if buf:
        statements.append("\n".join(buf))
    return statements

"""One exception hierarchy for everything ktui can refuse or fail at.

Every user mistake surfaces as a `KnowledgeError` subclass whose message can be
shown as-is (a toast, one CLI line); anything else escaping the facade is a bug.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class KnowledgeError(Exception):
    """Base of every error ktui raises on purpose."""


class ValidationError(KnowledgeError, ValueError):
    """Bad input: `errors` maps each offending field to a message."""

    def __init__(self, errors: Mapping[str, str] | str, message: str | None = None):
        if isinstance(errors, str):
            errors = {"input": errors}
        self.errors: dict[str, str] = dict(errors)
        if message is None:
            message = "; ".join(f"{field}: {msg}" for field, msg in self.errors.items())
        super().__init__(message)

    @classmethod
    def field(cls, name: str, message: str) -> ValidationError:
        return cls({name: message})


class NotFoundError(KnowledgeError, LookupError):
    def __init__(self, kind: str, ident: str):
        self.kind = kind
        self.ident = ident
        super().__init__(f"{kind} not found: {ident}")


class InvalidOperationError(KnowledgeError):
    """The call is well-formed but not allowed in the current state."""


class BaseUnavailableError(InvalidOperationError):
    """The base failed (its embedding model is missing): only delete and restore work."""

    def __init__(self, base_id: str, name: str | None = None):
        self.base_id = base_id
        label = f"'{name}'" if name else base_id
        super().__init__(
            f"Knowledge base {label} has no usable embedding model; "
            "restore it with a model available here (restore_base / `ktui base restore`)"
        )


class PartialDeletionError(KnowledgeError):
    """The rows are gone but some on-disk artifacts could not be removed."""

    def __init__(self, message: str, leftovers: Sequence[str] = ()):
        self.leftovers = list(leftovers)
        super().__init__(message)


class AggregateAcceptanceError(KnowledgeError):
    """Several inputs could not be accepted (restore, import): one line per failure."""

    def __init__(self, message: str, failures: Mapping[str, str]):
        self.failures = dict(failures)
        detail = "; ".join(f"{k}: {v}" for k, v in self.failures.items())
        super().__init__(f"{message}: {detail}" if detail else message)


class ConfigError(KnowledgeError):
    """The settings file (or an environment override) is malformed."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        self.file = file
        self.key = key
        where = ", ".join(p for p in (file and f"file {file}", key and f"key '{key}'") if p)
        super().__init__(f"{message} ({where})" if where else message)


class SchemaVersionError(KnowledgeError):
    """The database was written by a newer ktui; we refuse to touch it."""


class StoreError(KnowledgeError):
    """A base's vector store is missing, corrupt or unwritable."""


class ConstraintError(StoreError):
    """A rule of the catalogue's schema (a CHECK, a foreign key, a trigger) refused a row.

    The services validate before they write, so this means a caller bypassed them or a
    bug: the same error on SQLite and PostgreSQL, with the engine's own wording."""


class StoreDamagedError(StoreError):
    """A base's store file is missing, corrupt or not a ktui store.

    The damaged file is moved aside (`kept`, never deleted) and the base needs a
    rebuild from its items' sources: a forced reindex of the whole base
    (`reindex_items(..., force=True)`, `ktui reindex BASE --all`).
    """

    def __init__(self, path: str, reason: str, kept: str | None = None):
        self.path = str(path)
        self.reason = reason
        self.kept = kept
        where = f"; the damaged file was kept as {kept}" if kept else ""
        super().__init__(
            f"Vector store file {self.path} {reason}{where}; the base needs a rebuild from its sources "
            "(reindex all of it: `ktui reindex BASE --all`)"
        )


class DiskFullError(StoreError):
    """A write failed because the file system holding `path` has no space left.

    The runtime pauses its queue on this error (rather than failing item after
    item) and resumes by itself once space is free again.
    """

    def __init__(self, path: str, detail: str | None = None):
        self.path = str(path)
        super().__init__(f"no space left on device: {self.path}" + (f" ({detail})" if detail else ""))


class AccessDeniedError(StoreError):
    """A file or folder of the data directory cannot be opened or written (mode, owner,
    or a read-only file system). Not corruption: fixing the permission is enough."""

    def __init__(self, path: str, reason: str = "permission denied"):
        self.path = str(path)
        super().__init__(f"{reason}: {self.path}")


class IngestError(KnowledgeError):
    """A source could not be read, fetched, expanded or chunked. The message names it."""


class ProviderError(KnowledgeError):
    """An embedding or rerank provider failed; the message says what to do next.

    `status` is the HTTP status the server answered, when it answered one: a
    provider uses it to tell "you sent a field I do not know" (400/422) from the rest.
    """

    def __init__(self, message: str = "", *, status: int | None = None):
        super().__init__(message)
        self.status = status


class ProviderUnavailableError(ProviderError):
    """The provider's server could not be reached."""


class ModelNotFoundError(ProviderError):
    """The provider does not know the model."""


class EmbeddingShapeError(ProviderError):
    """The provider answered, but not with vectors of the expected shape."""


class TaskInterrupted(KnowledgeError):
    """Raised inside a runtime task when delete/reindex/shutdown interrupted it."""


class DataDirInUseError(InvalidOperationError):
    """A write was asked of a process that does not hold the data directory.

    The message names the holder (program, pid and, for `ktui serve`, its URL) so
    the user knows where to send the write instead.
    """


class ReadOnlyError(InvalidOperationError):
    """A write was asked of a service opened read-only (a reader beside the holder)."""

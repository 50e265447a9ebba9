"""The PostgreSQL + pgvector chunk store: a library piece, not yet wired to settings or the CLI.

See docs/postgres.md. Needs the ``postgres`` extra (psycopg 3, pgvector); importing this
package without them raises ImportError. Public API: PgStoreManager, PgBaseStore, PgTuning.
"""

from .connection import redact
from .manager import PgStoreManager
from .store import PgBaseStore, PgTuning

__all__ = ["PgBaseStore", "PgStoreManager", "PgTuning", "redact"]

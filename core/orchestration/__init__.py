"""KnowledgeOrchestrationService: the caller-facing workflow (the nine operations).

One class put together from one module per job: ``bases.py`` (create, delete,
restore), ``items.py`` (add, delete, reindex, watch), ``retrieval.py`` (search,
chunks, similar items), ``common.py`` (the collaborators and item helpers).

It validates input, calls the data services, and drives the runtime in the
orderings callers rely on:

* delete-items / reindex-items: collapse to roots → interrupt roots and wait →
  fresh descendants → interrupt all and wait → delete leaf vectors → delete root
  rows (cascade) | drop container children and prepare again | requeue leaves;
* delete-base: interrupt → delete rows → delete store files (PartialDeletionError
  when files remain);
* restore-base: a new base from the source's settings, root items only.
"""

from ktui.core.orchestration.bases import BaseWorkflow
from ktui.core.orchestration.common import BASE_DELETE_FAILED, payload_of
from ktui.core.orchestration.retrieval import Retrieval


class KnowledgeOrchestrationService(BaseWorkflow, Retrieval):
    """See the module docstring."""


__all__ = ["BASE_DELETE_FAILED", "KnowledgeOrchestrationService", "payload_of"]

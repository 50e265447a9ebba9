"""The headless sub-commands: each `cmd_<name>(settings, args) -> exit code`.

Every command opens the facade, does one thing and closes it. Reading commands
open a reader beside whoever holds the directory. Queued work that is not
waited for (`--wait`) is interrupted when the command exits and picked up again
by the next holder that recovers: the TUI, `ktui wait`, `ktui serve`.

`ktui.tui.cli` finds a command here by name (`cmd_<name>`); they are written one
module per family: `cli_bases.py` (base, groups), `cli_items.py` (add, items, item,
reindex, rm, search, chunks), `cli_service.py` (models, doctor, wait, watch),
`cli_rank.py` (rank), and what they share in `cli_shared.py`.
"""

from __future__ import annotations

from ktui.tui.cli_bases import (
    cmd_base_create,
    cmd_base_delete,
    cmd_base_export,
    cmd_base_import,
    cmd_base_list,
    cmd_base_restore,
    cmd_base_show,
    cmd_base_update,
    cmd_groups_create,
    cmd_groups_delete,
    cmd_groups_list,
    cmd_groups_rename,
)
from ktui.tui.cli_items import (
    cmd_add,
    cmd_chunks,
    cmd_item,
    cmd_items,
    cmd_reindex,
    cmd_rm,
    cmd_search,
)
from ktui.tui.cli_rank import (
    cmd_rank,
)
from ktui.tui.cli_service import (
    cmd_doctor,
    cmd_migrate,
    cmd_models,
    cmd_wait,
    cmd_watch,
)
from ktui.tui.cli_shared import EXIT_FAILURE, EXIT_OK, err, service

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "cmd_add",
    "cmd_base_create",
    "cmd_base_delete",
    "cmd_base_export",
    "cmd_base_import",
    "cmd_base_list",
    "cmd_base_restore",
    "cmd_base_show",
    "cmd_base_update",
    "cmd_chunks",
    "cmd_doctor",
    "cmd_groups_create",
    "cmd_groups_delete",
    "cmd_groups_list",
    "cmd_groups_rename",
    "cmd_item",
    "cmd_items",
    "cmd_migrate",
    "cmd_models",
    "cmd_rank",
    "cmd_reindex",
    "cmd_rm",
    "cmd_search",
    "cmd_wait",
    "cmd_watch",
    "err",
    "service",
]

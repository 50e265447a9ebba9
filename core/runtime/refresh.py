"""Incremental folder refresh: compare a directory item's children with the folder.

A file child records its size, modification time, content hash and the chunking
it was indexed with. Refreshing a folder then costs a walk and a `stat` per file:

* new files (and folders) become new children;
* a file whose size or mtime changed is hashed: same content → only its recorded
  metadata is updated; different content → it is re-read, and the embedding
  cache makes unchanged chunks free;
* deleted files and folders are removed with their vectors;
* unchanged, completed files cost nothing; failed or unfinished ones are retried.

`plan_refresh` is a pure function of the listing and the current children (plus
`stat`/hash calls), so it runs in a thread and is tested directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ktui.core.data.item_service import ChildSpec
from ktui.core.ingest import DirectoryListing
from ktui.core.ingest.pipeline import file_fingerprint, with_fingerprint
from ktui.core.models import DirectoryItemData, FileItemData, ItemStatus, ItemType, KnowledgeItem


@dataclass
class RefreshPlan:
    create: dict[str, list[ChildSpec]] = field(default_factory=dict)  # parent item id -> new subtrees
    delete: list[KnowledgeItem] = field(default_factory=list)  # top-most removed children
    reindex: list[KnowledgeItem] = field(default_factory=list)  # leaves to read again
    touch: list[tuple[KnowledgeItem, FileItemData]] = field(default_factory=list)  # metadata-only updates
    unchanged: int = 0

    @property
    def is_empty(self) -> bool:
        return not (self.create or self.delete or self.reindex or self.touch)


def plan_refresh(
    root: KnowledgeItem,
    listing: DirectoryListing,
    children: list[KnowledgeItem],
    chunking: str,
    *,
    queued: frozenset[str] = frozenset(),
) -> RefreshPlan:
    """Diff the folder (`listing`) against the root's current descendants (blocking).

    Leaves in `queued` (waiting in the queue, not started) are left alone: they will
    read the file as it is when their turn comes.
    """
    plan = RefreshPlan()
    by_path: dict[str, KnowledgeItem] = {}
    for child in children:
        path = getattr(child.data, "path", None)
        if path is not None:
            by_path[path] = child
    wanted: set[str] = set()

    def visit(node: DirectoryListing, parent_id: str) -> None:
        for sub in node.subdirs:
            wanted.add(sub.path)
            existing = by_path.get(sub.path)
            if existing is not None and existing.type == ItemType.DIRECTORY:
                visit(sub, existing.id)
            else:
                plan.create.setdefault(parent_id, []).append(_subtree(sub))
                _mark_wanted(sub, wanted)
        for path in node.files:
            wanted.add(path)
            existing = by_path.get(path)
            if existing is None or existing.type != ItemType.FILE:
                plan.create.setdefault(parent_id, []).append(
                    ChildSpec(ItemType.FILE, FileItemData(path=path, source=path))
                )
                continue
            if existing.id in queued:
                plan.unchanged += 1
                continue
            _compare_file(existing, chunking, plan)

    visit(listing, root.id)
    removed = {p for p in by_path if p not in wanted}
    removed_ids = {by_path[p].id for p in removed}
    # keep only the top-most removed items: their rows cascade to what is below
    plan.delete = [by_path[p] for p in sorted(removed) if by_path[p].group_id not in removed_ids]
    return plan


def _compare_file(item: KnowledgeItem, chunking: str, plan: RefreshPlan) -> None:
    data = item.data
    assert isinstance(data, FileItemData)
    if item.status != ItemStatus.COMPLETED or data.sha256 is None or data.chunking != chunking:
        plan.reindex.append(item)
        return
    try:
        st = os.stat(data.path)
    except OSError:
        plan.reindex.append(item)  # vanished between the walk and now: the read will say so
        return
    if st.st_size == data.size and st.st_mtime_ns == data.mtime_ns:
        plan.unchanged += 1
        return
    try:
        fp = file_fingerprint(data.path)
    except OSError:
        plan.reindex.append(item)
        return
    if fp.sha256 == data.sha256:
        plan.touch.append((item, with_fingerprint(data, fp, chunking)))
    else:
        plan.reindex.append(item)


def _subtree(node: DirectoryListing) -> ChildSpec:
    return ChildSpec(
        ItemType.DIRECTORY,
        DirectoryItemData(path=node.path, source=node.path),
        [_subtree(sub) for sub in node.subdirs]
        + [ChildSpec(ItemType.FILE, FileItemData(path=p, source=p)) for p in node.files],
    )


def _mark_wanted(node: DirectoryListing, wanted: set[str]) -> None:
    wanted.add(node.path)
    wanted.update(node.files)
    for sub in node.subdirs:
        _mark_wanted(sub, wanted)

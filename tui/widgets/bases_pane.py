"""The bases pane: bases grouped by group name, with emoji, status and item count."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ktui.core.models import BaseStatus, KnowledgeBase, KnowledgeGroup
from ktui.tui.host import key_hint
from ktui.tui.keymap import widget_bindings
from ktui.tui.text import clean, shorten

UNGROUPED = "Ungrouped"


NAME_LIMIT = 200


def base_prompt(base: KnowledgeBase, count: int | None, notice: str | None = None,
                restore_key: str = "R", rebuild_key: str = "Ctrl+R") -> Text:
    """One base as a list entry; its name, emoji and notice are data (cleaned, never markup)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(clean(base.emoji, one_line=True) + " ")
    t.append(clean(shorten(base.name, NAME_LIMIT), one_line=True), "bold")
    if count is not None:
        t.append(f"  {count}", "dim")
    if base.status == BaseStatus.FAILED:
        why = base.error.value.replace("_", " ") if base.error else "failed"
        t.append(f"\n   ✘ {why} — {restore_key} restores", "bold red")
    elif base.needs_rebuild:
        # its store is missing or damaged (the reason is in the search pane's status line)
        t.append(f"\n   ⚠ store needs a rebuild — {rebuild_key} reindexes all", "bold yellow")
    if notice:
        t.append("\n   ⚠ " + clean(shorten(notice, 300), one_line=True), "red")
    return t


class BasesPane(OptionList):
    """Options are bases (id = base id); group headings are disabled options."""

    BINDINGS: ClassVar[list[Binding]] = widget_bindings(
        ["list.down", "list.up", "list.top", "list.bottom", "pane.right"])

    def _prompt(self, base: KnowledgeBase, count: int | None, notice: str | None) -> Text:
        return base_prompt(base, count, notice, restore_key=key_hint(self, "base.restore"),
                           rebuild_key=key_hint(self, "base.reindex"))

    async def action_pane_right(self) -> None:
        await self.app.run_action("focus_pane('items')")

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.bases: dict[str, KnowledgeBase] = {}
        self.counts: dict[str, int] = {}
        self.notices: dict[str, str] = {}
        self._layout: list[str] = []

    @property
    def current_base(self) -> KnowledgeBase | None:
        option = self.highlighted_option
        if option is None or option.id is None:
            return None
        return self.bases.get(option.id)

    def show_bases(self, bases: list[KnowledgeBase], groups: list[KnowledgeGroup], counts: dict[str, int]) -> None:
        """Replace the content; keeps the highlighted base (by id) where it still exists."""
        keep = self.highlighted_option.id if self.highlighted_option is not None else None
        self.bases = {b.id: b for b in bases}
        self.counts = dict(counts)
        group_names = {g.id: g.name for g in groups}
        by_group: dict[str, list[KnowledgeBase]] = {}
        for base in bases:
            name = group_names.get(base.group_id, UNGROUPED) if base.group_id else UNGROUPED
            by_group.setdefault(name, []).append(base)
        order = sorted(by_group, key=lambda n: (n == UNGROUPED, n.casefold()))
        options: list[Option] = []
        layout: list[str] = []
        show_headings = len(order) > 1 or (order and order[0] != UNGROUPED)
        for name in order:
            if show_headings:
                options.append(Option(Text(clean(shorten(name, NAME_LIMIT), one_line=True), "bold underline"),
                                      id=f"group:{name}", disabled=True))
                layout.append(f"group:{name}")
            for base in sorted(by_group[name], key=lambda b: (b.name.casefold(), b.id)):
                options.append(Option(self._prompt(base, counts.get(base.id), self.notices.get(base.id)), id=base.id))
                layout.append(base.id)
        if layout == self._layout:
            # same shape: replace prompts in place, the highlight and scroll stay put
            for option in options:
                if option.id and not option.id.startswith("group:"):
                    self.replace_option_prompt(option.id, option.prompt)
            return
        self._layout = layout
        self.clear_options()
        self.add_options(options)
        target = keep if keep in self.bases else next(iter(i for i in layout if not i.startswith("group:")), None)
        if target is not None:
            self.highlighted = self.get_option_index(target)

    def update_counts(self, counts: dict[str, int]) -> None:
        self.counts = dict(counts)
        for base_id, base in self.bases.items():
            self.replace_option_prompt(base_id, self._prompt(base, counts.get(base_id), self.notices.get(base_id)))

    def set_notice(self, base_id: str, notice: str | None) -> None:
        if notice is None:
            self.notices.pop(base_id, None)
        else:
            self.notices[base_id] = notice
        base = self.bases.get(base_id)
        if base is not None:
            self.replace_option_prompt(base_id, self._prompt(base, self.counts.get(base_id), notice))

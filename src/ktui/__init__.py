"""ktui: keyboard-driven local knowledge bases.

The distribution installs three import packages under one name so that nothing
of ktui's can collide with another project's top-level `core` or `tui`:

- `ktui.core` — the Textual-free library: the `KnowledgeService` facade, the
  models, the errors and the Knowledge Engine (source folder `core/`);
- `ktui.tui`  — the terminal application and the `ktui` command line (`tui/`);
- `ktui`      — this small package (`src/ktui/`), so `python -m ktui` works.
"""

"""ktui's core: everything that is not UI. Never imports textual."""

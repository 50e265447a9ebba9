"""Start the TUI from the CLI (`ktui`, `ktui --demo`): the only place that runs the app."""

from __future__ import annotations

import contextlib
import sys

from ktui.core import Settings, default_config_path


def run_app(settings: Settings, *, demo: bool = False) -> int:
    """Run the TUI until the user quits; the exit code for the CLI (0 ok, 1 error).

    The chosen theme is saved into the settings file the settings came from (or the
    default one, created if needed)."""
    from ktui.tui.app import KtuiApp  # textual is imported only when the TUI runs

    app = KtuiApp(settings, demo=demo, settings_file=settings.config_file or default_config_path(),
                  stop_on_signals=True)
    result = app.run()
    if app.stopped_by_signal:
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone (EIO)
            print(f"ktui: stopped by {app.stopped_by_signal}; unfinished work resumes at the next start", file=sys.stderr)
    if app.return_code not in (None, 0):
        return int(app.return_code)
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover - `python -m ktui.tui.launch` for development
    from ktui.core import load_settings

    sys.exit(run_app(load_settings(), demo="--demo" in sys.argv))

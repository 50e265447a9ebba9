"""`python -m ktui` runs the `ktui` command line, exactly as the console script does."""

from ktui.tui.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

"""`ktui`: the TUI (no sub-command) and headless sub-commands over the same facade.

Start-up is kept short for scripts: this module imports only the standard
library and the settings loader (`ktui.core.load_settings`); the service (numpy, httpx, SQLite) is imported by
the command that needs it, and textual only by the TUI itself.

Exit codes: 0 success, 1 failure (including items that failed during --wait),
2 usage. Errors are one line on stderr; `--debug` adds the traceback.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import shutil
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from ktui.tui.cli_render import UsageError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

PROG = "ktui"


@functools.cache
def _help_width() -> int:
    return max(11, shutil.get_terminal_size().columns - 2)


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter with the terminal width looked up once per process.

    argparse builds a formatter for every `add_argument` (to check the metavar) and
    each one asks for the terminal size: ~230 lookups, ~30 ms of every command's
    start-up."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _help_width() if width is None else width)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser (and its sub-parsers) using `_Formatter` unless told otherwise."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Options accepted both before and after the sub-command."""
    d = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument("--data-dir", metavar="DIR", help="data directory (default: $KTUI_HOME or the platform's)", **d)
    parser.add_argument("--config", metavar="FILE", help="settings file (default: $KTUI_CONFIG or the platform's)", **d)
    parser.add_argument("--store", metavar="URL",
                        help="postgresql:// URL of a shared store (default: $KTUI_STORE, the settings' [store] url, "
                             "else SQLite in the data directory; docs/postgres.md)", **d)
    parser.add_argument("--json", action="store_true", help="print data as JSON (shapes: docs/cli.md)", **d)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs", **d)


def _unit_or_none(text: str) -> float | None:
    if text.lower() in ("none", "null", ""):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number (or 'none')") from None


def _int_or_none(text: str) -> int | None:
    if text.lower() in ("none", "null", ""):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer (or 'none')") from None


def _str_or_none(text: str) -> str | None:
    return None if text.lower() in ("none", "null", "") else text


def _on_off_default(text: str) -> bool | None:
    choice = text.lower()
    if choice in ("on", "true", "yes"):
        return True
    if choice in ("off", "false", "no"):
        return False
    if choice in ("default", "none", "null"):
        return None
    raise argparse.ArgumentTypeError(f"'{text}' is not one of on, off, default")


def _base_settings(p: argparse.ArgumentParser, *, update: bool) -> None:
    """Base configuration options shared by `base create` and `base update`."""
    d = {"default": argparse.SUPPRESS}  # absent options are not sent; 'none' clears a value
    if update:
        p.add_argument("--name", help="new name", **d)
    p.add_argument("--emoji", help="one emoji shown next to the name", **d)
    p.add_argument("--group", type=_str_or_none, metavar="GROUP", help="group name or id ('none' to ungroup)", **d)
    p.add_argument("--rerank-model", type=_str_or_none, metavar="ID", help="provider::model of a reranker ('none' clears)", **d)
    p.add_argument("--chunk-size", type=int, metavar="N", help="tokens per chunk (default 1024)", **d)
    p.add_argument("--chunk-overlap", type=int, metavar="N", help="tokens shared by neighbouring chunks (< chunk size)", **d)
    p.add_argument("--threshold", type=_unit_or_none, metavar="X", help="minimum similarity 0..1 ('none' clears)", **d)
    p.add_argument("--top-k", type=_int_or_none, metavar="N", help="results per search, 1..1000 ('none' = 10)", **d)
    p.add_argument("--mode", choices=["hybrid", "vector", "bm25", "default"],
                   help="search mode: hybrid, vector or bm25 ('default' is the old name of vector)", **d)
    p.add_argument("--alpha", type=_unit_or_none, metavar="X", help="hybrid weight of the vector side, 0..1", **d)
    p.add_argument("--ocr", type=_on_off_default, metavar="on|off|default",
                   help="recognise images and scanned PDF pages ('default' follows the settings' [ocr])", **d)
    p.add_argument("--ocr-languages", type=_str_or_none, metavar="LANGS",
                   help="Tesseract languages, e.g. eng+deu ('none' follows the settings)", **d)
    p.add_argument("--ocr-max-pages", type=_int_or_none, metavar="N",
                   help="most pages recognised in one file ('none' follows the settings, 500)", **d)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (`only`, a command name) the top level and that one
    command: argparse's parsers and arguments cost ~15-25 ms to build, mostly gettext
    lookups, and a command never parses another's (`main` picks it by `command_word`)."""
    parser = _Parser(
        prog=PROG,
        description="Local knowledge bases in the terminal. Without a command, opens the TUI.",
        epilog="See docs/cli.md for every command, its --json shape and the exit codes.",
    )
    _common(parser, top=True)
    parser.add_argument("--demo", action="store_true", help="open the TUI on the bundled demo base")
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def want(name: str) -> bool:
        return only is None or only == name

    def command(parent: Any, name: str, help_text: str) -> argparse.ArgumentParser:
        p = parent.add_parser(name, help=help_text, description=help_text)
        _common(p, top=False)
        p.set_defaults(usage_parser=p)  # a UsageError of this command shows its own usage
        return p

    if want("base"):
        base = sub.add_parser("base", help="create, list, show, update, delete, restore, export, import bases")
        bsub = base.add_subparsers(dest="base_command", metavar="ACTION", required=True)
        p = command(bsub, "create", "create a knowledge base")
        p.add_argument("name")
        p.add_argument("--model", metavar="ID", help="embedding model provider::model (default: the settings')")
        p.add_argument("--dimensions", type=int, metavar="N", help="vector width (default: detected from the model)")
        _base_settings(p, update=False)
        command(bsub, "list", "list knowledge bases")
        p = command(bsub, "show", "show one base's settings")
        p.add_argument("base", help="base id or unique name")
        p = command(bsub, "update", "change a base's settings (not its model: use restore)")
        p.add_argument("base", help="base id or unique name")
        _base_settings(p, update=True)
        p = command(bsub, "delete", "delete a base, its items and its index")
        p.add_argument("base", nargs="+", help="base id or unique name")
        p = command(bsub, "restore", "rebuild a base with another (or a now available) embedding model")
        p.add_argument("base", help="base id or unique name")
        p.add_argument("--model", metavar="ID", help="embedding model provider::model (default: the settings')")
        p.add_argument("--dimensions", type=int, metavar="N", help="vector width (default: detected from the model)")
        p.add_argument("--name", help="name of the new base (default: the source's)")
        p.add_argument("--wait", action="store_true", help="index now and wait until done")
        p = command(bsub, "export", "write bases (settings + root items) as a JSON document")
        p.add_argument("base", nargs="*", help="base id or unique name")
        p.add_argument("--all", action="store_true", help="export every base")
        p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
        p.add_argument("--vectors", action="store_true",
                       help="also every item and chunk with its vector: an import for the same model restores the "
                            "base without embedding again")
        p = command(bsub, "import", "recreate bases from an export or a legacy data.json backup")
        p.add_argument("file", help="JSON file ('-' reads stdin)")
        p.add_argument("--wait", action="store_true", help="index now and wait until done")
        p.add_argument("--again", action="store_true",
                       help="import bases that were imported from the same content before (a copy, 'Name (2)')")

    if want("add"):
        p = command(sub, "add", "add files, folders, URLs, sitemaps or notes to a base")
        p.add_argument("base", help="base id or unique name")
        p.add_argument("sources", nargs="*", metavar="PATH|URL", help="existing file or directory, or http(s) URL")
        p.add_argument("--dir", action="store_true", help="the paths must be directories")
        p.add_argument("--sitemap", action="store_true", help="the URLs are sitemaps (their pages are added)")
        p.add_argument("--note", action="append", default=[], metavar="TEXT", help="add a note ('-' reads stdin); repeatable")
        p.add_argument("--source-url", metavar="URL", help="where the notes came from")
        p.add_argument("--watch", action="store_true", help="keep directories in sync while the TUI runs")
        p.add_argument("--wait", action="store_true", help="index now and wait until done")

    if want("items"):
        p = command(sub, "items", "list a base's items")
        p.add_argument("base", help="base id or unique name")
        p.add_argument("--all", action="store_true", help="include the children of directories and sitemaps")
        p.add_argument("--type", choices=["file", "url", "note", "directory", "sitemap"])

    if want("item"):
        p = command(sub, "item", "show one item: status, error, chunks, which pages OCR recognised, chunks past the model's window")
        p.add_argument("base", help="base id or unique name")
        p.add_argument("item", help="item id, id prefix, source or name")

    if want("reindex"):
        p = command(sub, "reindex", "read and embed items again")
        p.add_argument("base", help="base id or unique name")
        p.add_argument("items", nargs="*", metavar="ITEM", help="item id, id prefix, source or name")
        p.add_argument("--all", action="store_true",
                       help="rebuild the whole base from its sources (also repairs a damaged or missing store)")
        p.add_argument("--wait", action="store_true", help="index now and wait until done")

    if want("rm"):
        p = command(sub, "rm", "remove items (and their chunks) from a base")
        p.add_argument("base", help="base id or unique name")
        p.add_argument("items", nargs="+", metavar="ITEM", help="item id, id prefix, source or name")

    if want("search"):
        p = command(sub, "search", "search one base, several, or all of them")
        # argparse spells a '+' argument "X [X ...]", which read as several queries
        p.usage = "ktui search [options] BASE [BASE ...] QUERY\n       ktui search [options] --all QUERY"
        p.add_argument("terms", nargs="+", metavar="BASE... QUERY",
                       help="base ids or unique names, then the query (with --all: the query only)")
        p.add_argument("--all", action="store_true", help="search every usable base")
        p.add_argument("--mode", choices=["hybrid", "vector", "bm25", "default"],
                       help="override the bases' search mode: hybrid, vector or bm25 ('default' = vector)")
        p.add_argument("--top-k", type=int, metavar="N", help="number of results (default: the base's)")
        p.add_argument("--type", action="append", dest="types", metavar="TYPE",
                       choices=["file", "url", "note", "directory", "sitemap"],
                       help="only items of this type, or read from a container of it (repeatable)")
        p.add_argument("--under", metavar="PREFIX", help="only items whose path or URL starts with PREFIX")
        p.add_argument("--after", metavar="DATE", help="only items added or reindexed at or after DATE (ISO-8601)")

    if want("chunks"):
        p = command(sub, "chunks", "list the stored chunks of an item")
        p.add_argument("base", help="base id or unique name")
        p.add_argument("item", help="item id, id prefix, source or name")

    if want("models"):
        command(sub, "models", "list embedding models of every configured provider")

    if want("doctor"):
        p = command(sub, "doctor", "check every file of the data directory (and --repair what can be repaired)")
        p.add_argument("--repair", action="store_true",
                       help="fix what was found: rebuild damaged stores, delete stray files, re-queue stuck items")
        p.add_argument("--wait", action="store_true", help="with --repair: wait until the rebuilds are done")

    if want("migrate"):
        p = command(sub, "migrate", "copy the whole data directory to another backend (vectors kept, counts verified)")
        p.add_argument("--to", required=True, metavar="URL|DIR",
                       help="a postgresql:// URL, or the data directory of a SQLite store (docs/postgres.md)")
        p.add_argument("--schema", metavar="NAME",
                       help="the target's PostgreSQL schema (default: the settings' [store] schema, ktui)")
        p.add_argument("--merge", action="store_true",
                       help="add to a target that already holds bases (also resumes an interrupted migrate)")
        p.add_argument("--batch", type=int, default=1000, metavar="N",
                       help="chunks and items copied per batch (default 1000)")

    if want("wait"):
        p = command(sub, "wait", "index queued work now and wait until it is done")
        p.add_argument("base", nargs="?", help="only this base (default: all)")

    if want("watch"):
        p = command(sub, "watch", "keep folders with watch on fresh, headless, until SIGINT/SIGTERM")
        p.add_argument("base", nargs="*", help="only these bases' folders (default: all)")

    if want("rank"):
        p = command(sub, "rank", "rank JSON-lines records by similarity to QUERY (the Knowledge Engine)")
        p.add_argument("query")
        p.add_argument("--input", "-i", metavar="FILE", help="JSON-lines file (default: stdin)")
        p.add_argument("--field", default="content", help="the record field holding the text (default: content)")
        p.add_argument("--min-score", type=float, metavar="X", help="drop matches scoring below X")
        p.add_argument("--top-k", type=int, metavar="N", help="keep the N best matches")
        p.add_argument("--model", metavar="ID", help="embedding model provider::model (default: the settings')")

    if want("mcp"):
        p = command(sub, "mcp", "serve the bases to AI agents over MCP (stdio); read-only unless --allow-writes")
        p.add_argument("--allow-writes", action="store_true",
                       help="hold the data directory and offer add_items and reindex as well")

    if want("serve"):
        p = command(sub, "serve", "serve the HTTP Data API (docs/http-api.md)")
        p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need a token)")
        p.add_argument("--port", type=int, default=8765, metavar="N", help="port (default 8765; 0 picks a free one)")
        p.add_argument("--token", metavar="T", help="bearer token every request must carry (default: settings 'serve_token' / $KTUI_SERVE_TOKEN)")

    if want("groups"):
        groups = sub.add_parser("groups", help="list, create, rename, delete base groups")
        gsub = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
        command(gsub, "list", "list groups")
        p = command(gsub, "create", "create a group")
        p.add_argument("name")
        p = command(gsub, "rename", "rename a group")
        p.add_argument("group", help="group id or name")
        p.add_argument("name")
        p = command(gsub, "delete", "delete a group (its bases become ungrouped)")
        p.add_argument("group", help="group id or name")
    return parser


COMMANDS = ("base", "add", "items", "item", "reindex", "rm", "search", "chunks", "models", "doctor", "migrate", "wait",
            "watch", "rank", "mcp", "serve", "groups")
_VALUE_OPTIONS = ("--data-dir", "--config", "--store")  # the top-level options that take a value


def _end_of_line() -> str:
    """On a terminal, a newline first: the progress bar (and the terminal's `^C`) end the
    line the cursor is on, and the message would be glued to them."""
    return "\n" if sys.stderr.isatty() else ""


def command_word(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, or None when the whole parser is needed: no command (the
    TUI), one argparse would not know, or the top-level help asked for before it.

    Options before the command are skipped as argparse reads them, abbreviations
    (`--conf FILE`) and `--opt=value` included."""
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token == "--":
            return None
        if token.startswith("-") and token != "-":
            if token == "-h" or (len(token) > 2 and "--help".startswith(token)):
                return None
            if len(token) > 2 and "=" not in token and any(o.startswith(token) for o in _VALUE_OPTIONS):
                skip = True
            continue
        return token if token in COMMANDS else None
    return None


class _VersionAction(argparse.Action):
    """Looks the version up only when asked (importlib.metadata costs start-up time)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"{PROG} {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ktui")
    except PackageNotFoundError:
        return "0+unknown"


def main(argv: Sequence[str] | None = None) -> int:
    # httpx's package init imports its own command-line client (click, rich, pygments:
    # ~30-50 ms) whenever those are installed, and textual brings rich. This process
    # never runs httpx's CLI; a None entry makes that import fail, and httpx falls back
    # to a stub `httpx.main` (its documented behaviour without the `cli` extra).
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[assignment]
    # Start-up imports several hundred modules and builds tens of thousands of objects
    # that live as long as the process, and no garbage worth a collection: the collector
    # walked them again and again (~5 % of a `ktui search`'s instructions). It is off
    # until `startup_over` (the command's facade is open, or a long-running front end
    # starts), and on again when `main` returns whatever happened.
    gc.disable()
    try:
        return _main(argv)
    finally:
        gc.enable()


def startup_over() -> None:
    """End `main`'s start-up: what start-up built is frozen (never walked by a collection
    again: it lives as long as the process) and the collector runs as usual. Nothing
    when the collector is on (not under `main`, or already called)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_word(argv))
    args = parser.parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    if debug:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _dispatch(parser, args)
    except UsageError as exc:
        getattr(args, "usage_parser", parser).print_usage(sys.stderr)
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{_end_of_line()}{PROG}: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print(f"{_end_of_line()}{PROG}: terminated; unfinished work resumes at the next start", file=sys.stderr)
        return 143
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one place that turns errors into exit codes
        from ktui.core.errors import KnowledgeError

        if debug:
            import traceback

            traceback.print_exc()
        if isinstance(exc, KnowledgeError):
            print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        elif isinstance(exc, OSError):  # a path the user gave that cannot be used: say which and why
            where = f": {exc.filename}" if exc.filename else ""
            print(f"{PROG}: error: {_one_line(exc.strerror or str(exc))}{_one_line(where) if where else ''}", file=sys.stderr)
        else:
            hint = "" if debug else " (run with --debug for details)"
            print(f"{PROG}: internal error: {type(exc).__name__}: {_one_line(str(exc))}{hint}", file=sys.stderr)
        return EXIT_FAILURE


def _one_line(text: str) -> str:
    from ktui.tui.cli_text import printable

    return printable(" ".join(text.split())) or "failed"


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ktui.core import load_settings

    for option, value in (("--data-dir", args.data_dir), ("--config", args.config), ("--store", args.store)):
        if value is not None and not str(value).strip():
            # an unset shell variable: never fall back to the real data directory silently
            raise UsageError(f"{option} is empty")
    settings = load_settings(config_file=args.config, data_dir=args.data_dir, store_url=args.store)
    if args.command is None:
        from ktui.tui.launch import run_app  # textual is imported only here

        startup_over()  # a long-running front end: the collector as usual (see `main`)
        return int(run_app(settings, demo=args.demo) or 0)
    if args.demo:
        raise UsageError("--demo only applies to the TUI (no command)")
    if args.command == "mcp":
        from ktui.tui.mcp_server import main as mcp_main

        startup_over()
        return mcp_main(settings, allow_writes=args.allow_writes)
    if args.command == "serve":
        from ktui.tui.http_api.server import main as serve_main

        startup_over()
        return serve_main(settings, host=args.host, port=args.port, token=args.token)
    from ktui.tui import cli_commands

    name = args.command
    for attr in ("base_command", "groups_command"):
        if getattr(args, attr, None):
            name = f"{name}_{getattr(args, attr)}"
    handler = getattr(cli_commands, f"cmd_{name}")
    import asyncio

    return asyncio.run(_stop_on_sigterm(handler(settings, args)))


class Terminated(Exception):
    """SIGTERM arrived: the command was cancelled like Ctrl+C cancels it."""


async def _stop_on_sigterm(command: Coroutine[Any, Any, int]) -> int:
    """Run `command`, cancelling it on SIGTERM exactly as asyncio cancels it on SIGINT.

    Without this, SIGTERM (systemd, `kill`, a closing multiplexer) ends the process
    on the spot: no `finally` runs, parse workers are left to notice on their own
    and the store is closed by the OS. Cancelled, the facade closes as it does on
    Ctrl+C and unfinished items resume at the next start. A command that wants
    SIGTERM itself (`ktui watch`) installs its own handler over this one.
    """
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated: list[bool] = []

    def on_sigterm() -> None:
        terminated.append(True)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError):  # not on this platform: keep the default
        return await command
    try:
        return await command
    except asyncio.CancelledError:
        if terminated:
            raise Terminated from None
        raise
    finally:
        try:
            loop.remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError):
            pass


if __name__ == "__main__":
    sys.exit(main())

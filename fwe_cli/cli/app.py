"""The `fwe` command line: thin commands over the loader core.

A command's module is imported when that command runs (or when `fwe --help` lists them all), not every command's
for any run: a fresh `fwe smoke` then imports only what a smoke needs before it starts its work."""

import importlib
import sys
from collections.abc import MutableMapping

import typer
from typer.main import get_command_from_info
from typer.models import CommandInfo

from fwe_cli import __version__
from fwe_cli.cli.group import FweCommand, FweGroup
from fwe_cli.cli.invocation import EarlyStart, Invocation, Run

# name -> its module under fwe_cli.cli, which holds the command function of that name and its HELP and EPILOG; the
# order is `fwe --help`'s
COMMANDS = {"smoke": "smoke_cmd", "measure": "measure_cmd", "tune": "tune_cmd", "bootstrap": "bootstrap_cmd",
            "tokenize": "tokenize_cmd", "doctor": "doctor_cmd", "report": "report_cmd"}


class LazyCommands(MutableMapping):
    """`fwe`'s commands by name, each built (its module imported) when first looked up: running one command looks up
    only that one; `fwe --help` and completion list them all."""

    def __init__(self, rich_markup_mode):
        self._built: dict = {}
        self._markup = rich_markup_mode

    def __getitem__(self, name: str):
        if name not in self._built:
            module = self.module(name)
            info = CommandInfo(name, cls=FweCommand, callback=getattr(module, name), help=module.HELP,
                               epilog=module.EPILOG)
            self._built[name] = get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short,
                                                      rich_markup_mode=self._markup)
        return self._built[name]

    @staticmethod
    def module(name: str):
        """The module of command `name` (KeyError: no such command)."""
        return importlib.import_module(f"fwe_cli.cli.{COMMANDS[name]}")

    def __setitem__(self, name: str, command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self):
        return iter({**dict.fromkeys(COMMANDS), **self._built})

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))


class FweApp(FweGroup):
    """The `fwe` group, its commands built lazily (LazyCommands). In the `fwe` process (an Invocation with an
    EarlyStart), a command whose module has a `start_early(words, early)` is handed its words as typed as soon as the
    process starts parsing (before typer checks any value, which imports pydantic and costs a fresh process tens of
    milliseconds, and before the command imports what it runs), so that it can start its first network request (fwe
    smoke: the Hub listing's one request of a warm start) and its round trip overlaps that work."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.rich_markup_mode)

    def make_context(self, info_name, args, *rest, **kwargs):
        early = kwargs["obj"].early
        if early is not None:
            self._start_early(list(args), early)
        return super().make_context(info_name, args, *rest, **kwargs)

    def _start_early(self, args: list[str], early: EarlyStart) -> None:
        """Read the words as click is about to (its own parsers: `fwe`'s, then the command's), and hand them to the
        command's start_early; nothing when `fwe` itself has an option (--help, --version), or the command's words
        ask for help or do not parse (the usage error click reports next)."""
        try:
            given, rest, _ = self.make_parser(typer.Context(self)).parse_args(args)
        except typer.TyperException:  # the usage error click reports next
            return
        if given or not rest or rest[0] not in COMMANDS:
            return
        start = getattr(LazyCommands.module(rest[0]), "start_early", None)
        if start is None:
            return
        command = self.commands[rest[0]]
        words, whole = command.read_words(typer.Context(command, info_name=rest[0]), rest[1:])
        if whole and not words.get("help"):
            start(words, early)


app = typer.Typer(
    name="fwe",
    cls=FweApp,
    help="FineWeb-Edu loader toolkit: measure, fix and gate data-loader stalls. "
    "Data goes to stdout (--json), humans to stderr, artifacts to ./artifacts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"fwe {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """FineWeb-Edu loader toolkit."""


def main() -> None:
    """The `fwe` process: SIGTERM stops a command as Ctrl-C does (exit 130, one line; bootstrap saves a resume point
    first), and a usage error is one `error:` line (exit 2) instead of typer's boxed panel."""
    import os
    import signal

    from rich.markup import escape

    from fwe_cli.cli.output import console, warnings_as_lines
    from fwe_cli.errors import InternalError

    invocation = Invocation(Run(own_process=True), EarlyStart())
    run = invocation.run
    # `datasets` imports torch, where it is installed, for every streaming dataset it builds (a torch base class, a
    # shared-memory epoch tensor): that doubles the start of the `datasets` Hub reader, which only iterates rows. This
    # process never hands a `datasets` object to torch; a USE_TORCH the user set wins.
    os.environ.setdefault("USE_TORCH", "0")
    warnings_as_lines()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = app(standalone_mode=False, obj=invocation)
    except typer.TyperException as exc:  # click's usage errors (typer's own parsing): bad value, unknown option
        if getattr(exc, "exit_code", 1) == 2 and hasattr(exc, "format_message") \
                and type(exc).__name__ != "NoArgsIsHelpError":
            console.print(f"[bold red]error:[/] {escape(exc.format_message() + _grid_hint(exc))} (see fwe --help)",
                          soft_wrap=True)
        else:
            exc.show()
        code = getattr(exc, "exit_code", 1)
    except (KeyboardInterrupt, typer.Abort):  # outside a command (commands map it themselves)
        console.print("[bold red]interrupted[/]", soft_wrap=True)
        code = 130
    except Exception as exc:  # FWE_TRACEBACK=1 lets a bug through: its traceback, and still one object
        run.note_error(InternalError(repr(exc)))
        run.finish(1)
        raise
    run.finish(code if isinstance(code, int) else 0)  # --json: the one object, with the code this process ends with
    sys.exit(run.code)


# fwe tune sweeps these settings with grid flags of its own; a list given to the single-value flag gets pointed there
GRID_FLAGS = {"--doc-batch": "--doc-batch-grid", "--q": "--q-grid", "--tokenizer-threads": "--threads-grid"}


def _grid_hint(exc: Exception) -> str:
    ctx, param = getattr(exc, "ctx", None), getattr(exc, "param", None)
    if ctx is None or getattr(ctx, "info_name", None) != "tune" or param is None:
        return ""
    grid = next((GRID_FLAGS[name] for name in getattr(param, "opts", ()) if name in GRID_FLAGS), None)
    return f"; to sweep values, fwe tune takes {grid} (e.g. {grid} 8,64)" if grid else ""


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt

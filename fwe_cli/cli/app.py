"""The `fwe` command line: thin commands over the loader core."""

import sys

import typer

from fwe_cli import __version__
from fwe_cli.cli import bootstrap_cmd, doctor_cmd, measure_cmd, report_cmd, smoke_cmd, tokenize_cmd, tune_cmd
from fwe_cli.cli.group import FweCommand, FweGroup


app = typer.Typer(
    name="fwe",
    cls=FweGroup,
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


app.command("smoke", cls=FweCommand, help=smoke_cmd.HELP, epilog=smoke_cmd.EPILOG)(smoke_cmd.smoke)
app.command("measure", cls=FweCommand, help=measure_cmd.HELP, epilog=measure_cmd.EPILOG)(measure_cmd.measure)
app.command("tune", cls=FweCommand, help=tune_cmd.HELP, epilog=tune_cmd.EPILOG)(tune_cmd.tune)
app.command("bootstrap", cls=FweCommand, help=bootstrap_cmd.HELP, epilog=bootstrap_cmd.EPILOG)(bootstrap_cmd.bootstrap)
app.command("tokenize", cls=FweCommand, help=tokenize_cmd.HELP, epilog=tokenize_cmd.EPILOG)(tokenize_cmd.tokenize)
app.command("doctor", cls=FweCommand, help=doctor_cmd.HELP, epilog=doctor_cmd.EPILOG)(doctor_cmd.doctor)
app.command("report", cls=FweCommand, help=report_cmd.HELP, epilog=report_cmd.EPILOG)(report_cmd.report)


def main() -> None:
    """The `fwe` process: SIGTERM stops a command as Ctrl-C does (exit 130, one line; bootstrap saves a resume point
    first), and a usage error is one `error:` line (exit 2) instead of typer's boxed panel."""
    import signal

    from rich.markup import escape

    from fwe_cli.cli.output import claim_process, console, finish, note_error, warnings_as_lines
    from fwe_cli.errors import InternalError

    claim_process()
    warnings_as_lines()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = app(standalone_mode=False)
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
        note_error(InternalError(repr(exc)))
        finish(1)
        raise
    code = code if isinstance(code, int) else 0
    finish(code)  # --json: the one object, with the code this process ends with
    sys.exit(code)


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

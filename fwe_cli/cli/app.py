"""The `fwe` command line: thin commands over the loader core."""

import typer

from fwe_cli import __version__
from fwe_cli.cli import bootstrap_cmd, measure_cmd, smoke_cmd, tune_cmd

app = typer.Typer(
    name="fwe",
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


app.command("smoke", help=smoke_cmd.HELP, epilog=smoke_cmd.EPILOG)(smoke_cmd.smoke)
app.command("measure", help=measure_cmd.HELP, epilog=measure_cmd.EPILOG)(measure_cmd.measure)
app.command("tune", help=tune_cmd.HELP, epilog=tune_cmd.EPILOG)(tune_cmd.tune)
app.command("bootstrap", help=bootstrap_cmd.HELP, epilog=bootstrap_cmd.EPILOG)(bootstrap_cmd.bootstrap)


def main() -> None:
    from fwe_cli.cli.output import claim_process, warnings_as_lines

    claim_process()
    warnings_as_lines()
    app()

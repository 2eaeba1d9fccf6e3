"""The `fwe` command group: where --json's one object per run is guaranteed (fwe_cli.cli.output.begin/finish)."""

import sys

import typer
from typer.core import TyperGroup


class FweGroup(TyperGroup):
    """The `fwe` group: every run goes through `main`, so this is where --json's one object is guaranteed
    (fwe_cli.cli.output.begin/finish): a usage error click finds before the command runs is noted here, and a run
    that ends through typer (in another program: CliRunner) prints its object as it exits. The `fwe` process runs
    non-standalone and finishes in fwe_cli.cli.app.main with the exit code it ends with."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        from fwe_cli.cli.output import begin, finish

        args = list(sys.argv[1:] if args is None else args)
        begin(args)
        try:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        except SystemExit as exc:  # standalone: typer's own exit, the code the caller sees
            finish(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
            raise

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except typer.TyperException as exc:  # a bad option of `fwe` itself
            _note_usage(exc)
            raise

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:  # no such command, a command's bad option or value
            _note_usage(exc)
            raise


def _note_usage(exc: BaseException) -> None:
    from fwe_cli.cli.output import note_error

    note_error(exc, exc.format_message() if hasattr(exc, "format_message") else None)

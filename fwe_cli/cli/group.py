"""The `fwe` command group and its commands' class: where each run gets its Invocation (fwe_cli.cli.invocation), so
where --json's one object per run is guaranteed, and where a run learns whether --json was asked for."""

import sys

import typer
from typer.core import TyperCommand, TyperGroup

from fwe_cli.cli.invocation import Invocation, Run, current

NO_JSON_GUARD = ("--help", "--version")  # their output is the text asked for, not a run's result


class FweGroup(TyperGroup):
    """The `fwe` group: every run goes through `main`, which gives it its Invocation (click's context object; the
    `fwe` process passes its own as `obj`), so this is where --json's one object is guaranteed: a usage error click
    finds before the command runs is noted here, and a run that ends through typer (in another program: CliRunner)
    prints its object as it exits. The `fwe` process runs non-standalone and finishes in fwe_cli.cli.app.main with
    the exit code it ends with."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        run = extra.setdefault("obj", Invocation()).run
        args = list(sys.argv[1:] if args is None else args)
        try:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        except SystemExit as exc:  # standalone: typer's own exit, the code the caller sees
            run.finish(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
            raise

    def make_context(self, info_name, args, *rest, **kwargs):
        words = list(args)
        try:
            return super().make_context(info_name, args, *rest, **kwargs)
        except typer.TyperException as exc:  # a bad option of `fwe` itself
            run = kwargs["obj"].run
            _no_command_parsed(run, words, None)
            _note_usage(run, exc)
            raise

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except typer.TyperException:  # no such command
            _no_command_parsed(current(ctx).run, args, args[0] if args else None)
            raise

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:  # no such command, a command's bad option or value
            _note_usage(current(ctx).run, exc)
            raise


class FweCommand(TyperCommand):
    """A command of `fwe`: whether its run prints one JSON object is read from its flags as click parses them, before
    their values are checked (so a bad value still gets the error object): `fwe smoke --local-path --json` gives
    --local-path the value "--json" and leaves JSON mode off; --help wins over --json."""

    def parse_args(self, ctx, args):
        words, _ = self.read_words(ctx, list(args))
        current(ctx).run.ask_json(bool(words.get("json_out")) and not words.get("help"), ctx.info_name)
        return super().parse_args(ctx, args)

    def read_words(self, ctx, args: list[str]) -> tuple[dict, bool]:
        """(the options in `args` as typed (parameter name -> its word, or a flag's value), before typer checks them;
        whether all the words parse: when not, the options of all but the last word, or none)."""
        parser = self.make_parser(ctx)
        parser.ignore_unknown_options = True  # an unknown option is the usage error click reports next
        for words in (args, args[:-1]):  # an option missing its value can only be the last word: read the others
            try:
                opts, _, _ = parser.parse_args(list(words))
            except typer.TyperException:  # a usage error click reports itself, next
                continue
            return opts, words is args
        return {}, False


def _no_command_parsed(run: Run, words: list[str], command: str | None) -> None:
    """A usage error of `fwe` itself (an unknown option or command): no command's flags were parsed, so --json among
    the words still asks `run` for the error object (unless --help or --version does, or it follows `--`)."""
    head = words[:words.index("--")] if "--" in words else words
    run.ask_json("--json" in head and not any(flag in head for flag in NO_JSON_GUARD), command)


def _note_usage(run: Run, exc: BaseException) -> None:
    run.note_error(exc, exc.format_message() if hasattr(exc, "format_message") else None)

"""Output conventions: data on stdout (JSON), humans on stderr (rich)."""

from __future__ import annotations

import sys
import threading

import orjson
from rich.console import Console

console = Console(stderr=True, highlight=False)
if not console.is_terminal:  # CI logs: wide enough that tables do not wrap into unreadable columns
    console = Console(stderr=True, highlight=False, width=160)


def _write_json(obj) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    sys.stdout.flush()


# -- --json: exactly one object on stdout per run ----------------------------------------------------------------------
# `begin` (the `fwe` group, as a run starts) resets the run; `ask_json` (the command's parsed flags, fwe_cli.cli.group)
# says whether --json was asked for. A command's print_json then only holds its result; `finish` (every way a run
# ends: the group's exit, `fwe`'s main, end_now, smoke's watchdog) prints it once with `exit_code`, or, when the run
# ended before a result (usage error, exception, interrupt), an error object {ok: false, exit_code, error: {type,
# message, stage?}, command}. The first `finish` wins; later ones print nothing and return False.
_RUN: dict = {"json": False, "command": None, "result": None, "error": None, "done": False}
_RUN_LOCK = threading.Lock()


def begin() -> None:
    """A run of `fwe` starts: no result, no error, no JSON object until a command's flags ask for one."""
    with _RUN_LOCK:
        _RUN.update(json=False, command=None, result=None, error=None, done=False)


def ask_json(wants: bool, command: str | None) -> None:
    """Whether this run prints its one JSON object (--json as the command's flags were parsed), and which command it
    is (named in an error object)."""
    with _RUN_LOCK:
        _RUN.update(json=wants, command=command)


def note_error(exc: BaseException, message: str | None = None) -> None:
    """Why the run is ending, for the error object (the first reason noted stands); `message` in place of the
    exception's own text (click's usage errors word theirs in format_message)."""
    from fwe_cli.artifacts import error_record

    record = error_record(exc) if message is None else dict(error_record(exc), message=message)
    with _RUN_LOCK:
        if _RUN["error"] is None:
            _RUN["error"] = record


def report_failure(exc: BaseException) -> int:
    """A run ends on a known failure or outcome: noted for --json's error object, one line on stderr; its exit code
    (fwe_cli.cli.exit_codes, the one table)."""
    from fwe_cli.cli.exit_codes import error_line, exit_code_for

    note_error(exc)
    console.print(error_line(exc), soft_wrap=True)
    return exit_code_for(exc)


class Exit(Exception):
    """How the error object names a run that ended with a non-zero code and no error noted."""


def print_json(obj) -> None:
    """The command's result object: held until the run ends when --json guards stdout, else printed now."""
    with _RUN_LOCK:
        if _RUN["json"]:
            if not _RUN["done"]:
                _RUN["result"] = obj
            return
    _write_json(obj)


def finish(code: int, result: dict | None = None) -> bool:
    """End the run with `code`: with --json, print its one object (`result` or the held one, else an error object).
    False when another path has finished the run already (nothing is printed then)."""
    with _RUN_LOCK:
        if _RUN["done"]:
            return False
        _RUN["done"] = True
        if not _RUN["json"]:
            return True
        error = _RUN["error"] if code else None
        if code and error is None:
            from fwe_cli.artifacts import error_record

            error = error_record(KeyboardInterrupt("interrupted") if code == 130 else Exit(f"exit code {code}"))
        held = result if result is not None else _RUN["result"]
        if held is None:
            obj = {"ok": code == 0, "exit_code": code, "error": error, "command": _RUN["command"]}
        else:
            obj = dict(held, exit_code=code)
            obj.setdefault("ok", code == 0)
            if obj.get("error") is None:
                obj["error"] = error
        _write_json(obj)
        return True


def fmt_s(value: float | None) -> str:
    return "—" if value is None else (f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s")


def fmt_ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} ms"


_OWN_PROCESS = False  # set by `fwe`'s entry point; False when a command runs inside another program (CliRunner)


def claim_process() -> None:
    """This process is the `fwe` command itself: a command may end it without interpreter shutdown."""
    global _OWN_PROCESS
    _OWN_PROCESS = True


def end_now(code: int) -> None:
    """End the command with `code`. In the `fwe` process itself: flush stdout and stderr, then os._exit, so
    interpreter shutdown neither waits for abandoned background work (a tokenizer encode or a Hub read the run
    no longer needs, a producer stuck in a native read) nor aborts when such work ends mid-finalization. Callers
    have written their artifact and output by then. Inside another program: typer.Exit(code), as usual."""
    import typer

    finish(code)
    if _OWN_PROCESS:
        sys.stdout.flush()
        sys.stderr.flush()
        import os

        os._exit(code)
    raise typer.Exit(code)


def warnings_as_lines() -> None:
    """Show warnings (a loud fallback, a call that needed retries, GPT-2 from the packaged vocabulary) as one line
    each on stderr, not Python's two (file:line, then the source line); an FweNotice (not a problem) as a `note:`
    line. Installed by the `fwe` process itself."""
    import warnings

    from rich.markup import escape

    from fwe_cli.errors import FweNotice

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        label = "[dim]note:[/]" if issubclass(category, FweNotice) else "[yellow]warning:[/]"
        console.print(f"{label} {escape(str(message))}", soft_wrap=True)

    warnings.showwarning = show


def report_verify(report: dict, counted: str, json_out: bool) -> None:
    """A `--verify` report (bootstrap's parts, tokenize's shards): a `bad:` line per problem and one verdict line
    naming what was checked (`counted`); the report on stdout with --json; VerifyFailed (exit 1) when it is not ok."""
    from rich.markup import escape

    from fwe_cli.errors import VerifyFailed

    for problem in report["problems"]:
        console.print(f"[red]bad:[/] {escape(problem['name'])}: {escape(problem['problem'])}", soft_wrap=True)
    status = "[green]OK[/]" if report["ok"] else "[red]FAILED[/]"
    console.print(f"verify {status}: {counted}, complete={report['complete']}, manifest "
                  f"{escape(report['manifest_path'])}", soft_wrap=True)
    if json_out:
        print_json(report)
    if not report["ok"]:
        raise VerifyFailed(f"{len(report['problems'])} problem(s) in {report['manifest_path']}"
                           + ("" if report["complete"] else "; not complete"))


def write_failure_artifact(artifact: str, record: dict) -> None:
    """Write a failed run's artifact; when even that cannot be written, one warning line (the run's own error is the
    one to report and exit with, so this never raises)."""
    from rich.markup import escape

    from fwe_cli.artifacts import write_json
    from fwe_cli.cli.exit_codes import one_line
    from fwe_cli.errors import OutputError

    try:
        write_json(artifact, record)
    except OutputError as lost:
        console.print(f"[yellow]warning:[/] no artifact: {escape(one_line(lost))}", soft_wrap=True)

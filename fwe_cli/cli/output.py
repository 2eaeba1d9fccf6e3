"""Output conventions: data on stdout (JSON), humans on stderr (rich)."""

from __future__ import annotations

import sys

import orjson
from rich.console import Console

console = Console(stderr=True, highlight=False)
if not console.is_terminal:  # CI logs: wide enough that tables do not wrap into unreadable columns
    console = Console(stderr=True, highlight=False, width=160)


def print_json(obj) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    sys.stdout.flush()


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

    if _OWN_PROCESS:
        sys.stdout.flush()
        sys.stderr.flush()
        import os

        os._exit(code)
    raise typer.Exit(code)


def warnings_as_lines() -> None:
    """Show warnings (a loud fallback, a call that needed retries, GPT-2 from the packaged vocabulary) as one line
    each on stderr, not Python's two (file:line, then the source line). Installed by the `fwe` process itself."""
    import warnings

    from rich.markup import escape

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        console.print(f"[yellow]warning:[/] {escape(str(message))}", soft_wrap=True)

    warnings.showwarning = show

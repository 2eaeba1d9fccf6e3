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


def warnings_as_lines() -> None:
    """Show warnings (a loud fallback, a call that needed retries, GPT-2 from the packaged vocabulary) as one line
    each on stderr, not Python's two (file:line, then the source line). Installed by the `fwe` process itself."""
    import warnings

    from rich.markup import escape

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        console.print(f"[yellow]warning:[/] {escape(str(message))}", soft_wrap=True)

    warnings.showwarning = show

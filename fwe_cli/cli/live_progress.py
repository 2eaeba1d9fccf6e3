"""Live progress of `fwe measure` and `fwe tune`: a table on stderr that fills run by run, with an ETA.

Shown only on a terminal without --json. On a pipe (a CI log) or with --json nothing of it is printed: a log gets
the final tables once, a program reading --json gets the one object, and neither gets redraw escape codes.
"""

from __future__ import annotations

import time
from typing import Callable

from rich.markup import escape
from rich.table import Table

from fwe_cli.cli.output import console
from fwe_cli.measure.plan import RunEvent


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds} s"


class LiveRuns:
    """Context manager; `on_run` is the `RunEvent` callback of `run_measure` / `run_tune`.

    `columns` head the table; `row(record)` gives a finished run's cells after its label. The ETA is the mean
    duration of the runs so far times the runs left (capped by `budget_s` when the plan has one)."""

    def __init__(self, title: str, columns: list[str], row: Callable[[dict], list[str]], json_out: bool,
                 budget_s: float | None = None, max_rows: int = 12):
        self.title, self.columns, self.row, self.budget_s, self.max_rows = title, columns, row, budget_s, max_rows
        self.enabled = console.is_terminal and not json_out
        self._rows: list[list[str]] = []
        self._running: tuple[str, float] | None = None  # label, monotonic start
        self._started = time.monotonic()
        self._total = 0
        self._durations: list[float] = []
        self._live = None

    def __enter__(self) -> "LiveRuns":
        if self.enabled:
            from rich.live import Live

            self._live = Live(get_renderable=self._render, console=console, refresh_per_second=2, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def on_run(self, event: RunEvent) -> None:
        self._total = event.total
        if event.phase == "start":
            self._running = (event.label, time.monotonic())
        else:
            if self._running is not None:
                self._durations.append(time.monotonic() - self._running[1])
            self._running = None
            record = event.record or {}
            error = record.get("error")
            cells = ([f"[red]failed[/] {escape(str(error.get('message', ''))[:50])}"] + [""] * (len(self.columns) - 2)
                     if error else self.row(record))
            self._rows.append([escape(event.label), *cells])
        if self._live is not None:
            self._live.refresh()  # every event is one frame, whatever the refresh rate

    def eta_s(self) -> float | None:
        """Seconds left: mean run duration x runs not yet done (the running one counts), capped by the budget."""
        if not self._durations:
            return None
        left = self._total - len(self._rows)
        eta = sum(self._durations) / len(self._durations) * left
        if self._running is not None:
            eta -= min(time.monotonic() - self._running[1], sum(self._durations) / len(self._durations))
        if self.budget_s is not None:
            eta = min(eta, self.budget_s - (time.monotonic() - self._started))
        return max(0.0, eta)

    def _render(self) -> Table:
        elapsed = time.monotonic() - self._started
        eta = self.eta_s()
        caption = (f"{len(self._rows)}/{self._total} done · elapsed {_clock(elapsed)} · ETA "
                   + ("—" if eta is None else _clock(eta)))
        table = Table(title=self.title, title_justify="left", caption=caption, caption_justify="left")
        for index, column in enumerate(self.columns):
            table.add_column(column, justify="left" if index == 0 else "right")
        hidden = max(0, len(self._rows) - self.max_rows)
        if hidden:
            table.add_row(f"[dim]… {hidden} earlier[/]", *[""] * (len(self.columns) - 1))
        for cells in self._rows[hidden:]:
            table.add_row(*cells)
        if self._running is not None:
            label, since = self._running
            table.add_row(f"[cyan]{escape(label)}[/]", f"[cyan]running {_clock(time.monotonic() - since)}[/]",
                          *[""] * (len(self.columns) - 2))
        return table

"""`--baseline ARTIFACT.json --max-regression PCT` on `fwe smoke` and `fwe measure`: fail CI (exit 5) when this run is
worse than the last good one. The gate and its comparison are fwe_cli.measure.gate and fwe_cli.measure.regression;
this is their command-line side: the flags, and the deltas on stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.cli.output import console, fmt_ms, fmt_s
from fwe_cli.errors import Regression

PANEL = "Regression gate"
Baseline = Annotated[Optional[Path], typer.Option(
    "--baseline", metavar="PATH", rich_help_panel=PANEL, show_default=False,
    help="A previous artifact of this command (smoke: artifacts/smoke/<UTC>.json; measure: .../summary.json) to "
         "compare against; exit 5 when a metric is worse by more than --max-regression.")]
MaxRegression = Annotated[Optional[float], typer.Option(
    "--max-regression", metavar="PCT", rich_help_panel=PANEL, show_default=False,
    help="How much worse than --baseline a metric may be, in % (medians of the runs; with --repeats on both sides "
         "the ranges must not overlap either; tiny absolute changes never count). Default 10. Only with --baseline.")]


def _fmt(metric: str, value: float | None) -> str:
    from fwe_cli.measure.regression import METRICS

    unit = METRICS[metric][2]
    if value is None or unit not in ("s", "ms"):
        return "—" if value is None else f"{value:,.0f}"
    return fmt_s(value) if unit == "s" else fmt_ms(value)


def gate_table(record: dict) -> Table:
    """The deltas, one row per compared metric."""
    table = Table(title=f"regression gate — against {escape(str(record['baseline']))}", title_justify="left")
    for column in ("metric", "baseline", "now", "Δ %", "bound", "result", "note"):
        table.add_column(column, justify="right" if column in ("baseline", "now", "Δ %", "bound") else "left")
    for check in record["checks"]:
        n_then, n_now = check["n_baseline"], check["n_current"]
        runs = f" (n={n_then}/{n_now})" if max(n_then, n_now) > 1 else ""
        delta = "—" if check["delta_pct"] is None else f"{check['delta_pct']:+.1f} %"
        table.add_row(escape(check["metric"]) + runs, _fmt(check["metric"], check["baseline"]),
                      _fmt(check["metric"], check["current"]), delta, f"{check['bound_pct']:g} %",
                      "[green]pass[/]" if check["pass"] else "[bold red]REGRESSED[/]", escape(check["note"]))
    return table


def print_gate(result: dict, regression: Regression | None, table: bool = True) -> None:
    """On stderr: the table of deltas and its notes (`table`), and the gate's verdict in one line; nothing without
    --baseline. A regression that decides the run's outcome is its error line (exit 5); one that does not (the run
    failed by itself, its own code and error stand) is said here, since no other line will."""
    record = result.get("regression")
    if record is None:
        return
    if table:
        console.print(gate_table(record))
        for note in record["notes"]:  # skipped metrics, allowed differences: whole lines, not a wrapped caption
            console.print(f"[dim]note:[/] {escape(note)}", soft_wrap=True)
    where = escape(str(record["baseline"]))
    if regression is None:
        if table:
            console.print(f"regression gate: [green]pass[/] (no metric of {len(record['checks'])} worse than {where} "
                          f"by more than {record['max_regression_pct']:g} %)", soft_wrap=True)
        return
    if (result.get("error") or {}).get("type") != "Regression":
        console.print(f"[bold red]REGRESSED[/] against {where}: {escape(str(regression))} (exit "
                      f"{result.get('exit_code')}: the run's own failure decides)", soft_wrap=True)

"""`--baseline ARTIFACT.json --max-regression PCT` on `fwe smoke` and `fwe measure`: fail CI (exit 5) when this run is
worse than the last good one. The comparison itself is fwe_cli.measure.regression; this is its command-line side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.cli.exit_codes import EXIT_KPI
from fwe_cli.cli.options import FLAG_NAMES
from fwe_cli.cli.output import console, fmt_ms, fmt_s, note_error

PANEL = "Regression gate"
Baseline = Annotated[Optional[Path], typer.Option(
    "--baseline", metavar="PATH", rich_help_panel=PANEL, show_default=False,
    help="A previous artifact of this command (smoke: artifacts/smoke/<UTC>.json; measure: .../summary.json) to "
         "compare against; exit 5 when a metric is worse by more than --max-regression.")]
MaxRegression = Annotated[Optional[float], typer.Option(
    "--max-regression", metavar="PCT", rich_help_panel=PANEL, show_default=False,
    help="How much worse than --baseline a metric may be, in % (medians of the runs; with --repeats on both sides "
         "the ranges must not overlap either; tiny absolute changes never count). Default 10. Only with --baseline.")]


def prepare_gate(kind: str, baseline: Path | None, max_regression: float | None, config: dict,
                 plan: dict | None = None) -> dict | None:
    """Check --baseline and --max-regression before the run (a bad baseline fails before any time is spent): the
    gate {path, record, max_regression} to hand to `gate_summary`, or None without --baseline. ConfigError (exit 2,
    one line) for --max-regression without --baseline or out of range, a baseline that cannot be read, is not a good
    run of fwe `kind`, or measured other work than `config` (and `plan`, for measure) describe."""
    from fwe_cli.errors import ConfigError
    from fwe_cli.measure.regression import (DEFAULT_MAX_REGRESSION_PCT, check_max_regression, check_same_work,
                                            load_baseline)

    if baseline is None:
        if max_regression is not None:
            raise ConfigError(f"--max-regression {max_regression:g} needs --baseline ARTIFACT.json (the run to "
                              "compare against)")
        return None
    bound = DEFAULT_MAX_REGRESSION_PCT if max_regression is None else max_regression
    check_max_regression(bound)
    path = str(baseline)
    record = load_baseline(path, kind)
    check_same_work(kind, record, config, plan, path, FLAG_NAMES)
    return {"path": path, "record": record, "max_regression": bound}


def gate_summary(summary: dict, kind: str, gate: dict | None) -> int:
    """Compare this run's result (`summary`: smoke's artifact or measure's summary, its `exit_code` set) with the
    gate's baseline; the comparison goes into summary["regression"] (None without a gate). Returns EXIT_KPI when a
    metric regressed and the run itself succeeded: summary's ok, exit_code and error then say so, and the error is
    noted for --json. Otherwise 0: a run that failed keeps its own code and error (the comparison is kept, for
    information). Prints nothing: `print_gate` does."""
    from fwe_cli.measure.regression import compare, regression_message

    if gate is None:
        summary["regression"] = None
        return 0
    record = compare(kind, gate["record"], summary, gate["max_regression"], gate["path"])
    summary["regression"] = record
    if record["pass"] or summary.get("exit_code"):
        return 0
    error = {"type": "Regression", "message": regression_message(record), "stage": None}
    summary.update(ok=False, exit_code=EXIT_KPI, error=error)
    note_error(error)
    return EXIT_KPI


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


def print_gate(summary: dict, table: bool = True) -> None:
    """On stderr: the table of deltas (`table`), and the outcome in one line; nothing without --baseline. The line
    is printed even without the table: a regression ends the run with exit 5 and must say why."""
    from fwe_cli.measure.regression import regression_message

    record = summary.get("regression")
    if record is None:
        return
    if table:
        console.print(gate_table(record))
        for note in record["notes"]:  # skipped metrics, allowed differences: whole lines, not a wrapped caption
            console.print(f"[dim]note:[/] {escape(note)}", soft_wrap=True)
    where = escape(str(record["baseline"]))
    if record["pass"]:
        if table:
            console.print(f"regression gate: [green]pass[/] (no metric of {len(record['checks'])} worse than {where} "
                          f"by more than {record['max_regression_pct']:g} %)", soft_wrap=True)
        return
    error = summary.get("error") or {}
    own = error.get("type") != "Regression"  # the run failed by itself: its own code and error stand
    console.print(f"[bold red]REGRESSED[/] against {where}: {escape(regression_message(record))}"
                  + (f" (exit {summary.get('exit_code')}: the run's own failure decides)" if own else " (exit 5)"),
                  soft_wrap=True)

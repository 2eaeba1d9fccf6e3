"""`fwe measure`: Phase 0 — cold vs warm first batch (by phase) and steady-state fetch latency."""

import os
from pathlib import Path
from typing import Annotated, Callable

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.artifacts import prepare_output_dir, utc_stamp, write_json
from fwe_cli.cli.exit_codes import MEASURE_EXIT_CODES_HELP, record_outcome
from fwe_cli.cli.live_progress import LiveRuns
from fwe_cli.cli.options import FLAG_NAMES, ArtifactsDir, JsonFlag, Repeats, RunTimeout, StepMs, Steps, Targets, Timeout, fwe_command
from fwe_cli.cli.invocation import Run
from fwe_cli.cli.output import console, fmt_ms, fmt_s
from fwe_cli.cli.regression_gate import Baseline, MaxRegression, print_gate
from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import resolve_config
from fwe_cli.measure.plan import DEFAULT_STEP_MS, parse_targets

HELP = """Measure cold vs warm time to first batch, split into phases, and steady-state fetch latency.

Each run is a fresh Python process. Cold: empty Hugging Face cache and local file pages dropped from the page cache.
Warm: the same run again with the caches left behind. Phases (they add up to first_batch_s): interpreter_start,
imports, tokenizer_ready, source_opened (Hub handshake/metadata/listing), first_document, first_batch,
warmup_filled. Steady state over --steps: time blocked in next() (p50/p95/p99/max), tokens/s, docs/s, queue
fill, CPU %, peak RSS, and the stall fraction against --step-ms of simulated training step (default 100 ms: about
one step of a GPT-2-small-sized model at batch 8 x 1024 on one GPU; give your training log's step time). With
--step-ms 0 the loader runs alone: raw tokens/s, and no stall fraction (every wait would count as one).

On a terminal a table fills run by run with an ETA; on a pipe only the final tables are printed, and with --json
stderr carries only warnings and errors.

Writes artifacts/measure/<UTC>/summary.json plus each run's heartbeat JSONL; --json prints the summary.

Examples:

  fwe measure --cold --warm --source synthetic --tokenizer byte

  fwe measure --cold --warm --local-path /data/fwe_bootstrap --tokenizer gpt2 --steps 500 --step-ms 150 --fail-on-kpi

  fwe measure --warm --source synthetic --tokenizer byte --step-ms 0    (the loader alone: raw tokens/s)

  fwe measure --warm --source hub --tokenizer gpt2 --targets warm_first_batch_s=3,fetch_p95_ms=50
"""


def refuse_heartbeat_dir(loader_flags: dict, command: str) -> None:
    """ConfigError (exit 2, one line) when --heartbeat-dir was given to `command`; drops it from loader_flags. For
    `fwe measure` and `fwe tune`: each run is a process of its own writing heartbeat_rank{r}.jsonl into its own run
    folder, so the shared flag means nothing there (their --help hides it: fwe_command(hidden=...))."""
    if loader_flags.pop("heartbeat_dir", None) is not None:
        raise ConfigError(f"--heartbeat-dir is not taken by fwe {command}: each run writes its heartbeat_rank{{rank}}"
                          ".jsonl into its own run folder under --artifacts-dir (see the summary's runs)")


def _stall_header(step_ms: float) -> str:
    return f"stall @{step_ms:g} ms" if step_ms else "stall"


def _stall_cell(stall: float | None) -> str:
    return "—" if stall is None else f"{stall:.1%}"


def _stalled_cell(run: dict) -> str:
    """Steps after the first that found the queue empty and waited (measure.warmup.StalledSteps), and the first."""
    if not run.get("stalled_steps"):
        return "—" if run.get("stalled_steps") is None else "0"
    return f"{run['stalled_steps']} (from {run['first_stalled_step']})"


def _live_row(step_ms: float) -> tuple[list[str], Callable[[dict], list[str]]]:
    """Columns of the live table after the run's kind, and how a finished run fills them."""
    columns = ["first batch", "p95", _stall_header(step_ms), "tokens/s"]

    def row(run: dict) -> list[str]:
        return [fmt_s(run["first_batch_s"]), fmt_ms(run["fetch_p95_ms"]), _stall_cell(run["stall_fraction"]),
                f"{run['tokens_per_s'] or 0:,.0f}"]

    return columns, row


def _runs_table(summary: dict) -> Table:
    table = Table(title="fwe measure — runs", title_justify="left",
                  caption=None if summary["plan"]["step_ms"] else "stall: — with --step-ms 0 (the loader alone)",
                  caption_justify="left")
    for column in ("run", "first batch", "slowest phase", "p50", "p95", "p99", _stall_header(summary["plan"]["step_ms"]),
                   "stalled steps", "tokens/s", "RSS MB", "requests"):
        table.add_column(column, justify="left" if column in ("run", "slowest phase") else "right")
    for run in summary["runs"]:
        if run.get("error"):
            table.add_row(run["kind"], "[red]failed[/]", escape(run["error"]["message"][:60]), *[""] * 8)
            continue
        phase, secs = max(run["phases"].items(), key=lambda kv: kv[1])
        table.add_row(run["kind"], fmt_s(run["first_batch_s"]), f"{phase} {fmt_s(secs)}", fmt_ms(run["fetch_p50_ms"]),
                      fmt_ms(run["fetch_p95_ms"]), fmt_ms(run["fetch_p99_ms"]),
                      _stall_cell(run["stall_fraction"]), _stalled_cell(run), f"{run['tokens_per_s'] or 0:,.0f}",
                      f"{run['peak_rss_mb']:.0f}", "—" if run["requests"] is None else str(run["requests"]))
    return table


def _verdict_cells(check: dict) -> tuple[str, str, str]:
    """A verdict check as (target, limit, measured): a KPI under the name --targets and the README give it, its
    figures in seconds or milliseconds with their unit; the completed-runs check as counts."""
    target = check["target"]
    if target == "runs_completed":
        return "runs completed", f"all {check['limit']}", str(check["value"])
    fmt = fmt_ms if target.endswith("_ms") else fmt_s
    return target, f"< {fmt(check['limit'])}", fmt(check["value"])


def _verdict_table(summary: dict) -> Table:
    table = Table(title="verdict against targets", title_justify="left")
    for column in ("target", "limit", "measured (worst)", "result"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for check in summary["verdict"]["checks"]:
        table.add_row(*_verdict_cells(check), "[green]pass[/]" if check["pass"] else "[bold red]MISS[/]")
    return table


def _advice(summary: dict, queue_depth: int, warmup_batches: int) -> None:
    """Where the stall went (by producer stage) and the warmup that would have removed the stalled steps."""
    from fwe_cli.measure.warmup import advice_line

    if summary["stall_split"] is not None:
        console.print(f"where the wait went: {escape(summary['stall_split']['line'])}", soft_wrap=True)
    console.print(escape(advice_line(summary["warmup_advice"], queue_depth, warmup_batches)), soft_wrap=True)


@fwe_command(hidden=("heartbeat_dir",))
def measure(
    cold: Annotated[bool, typer.Option("--cold", help="Run with empty caches.")] = False,
    warm: Annotated[bool, typer.Option("--warm", help="Run again with the caches left behind.")] = False,
    steps: Steps = 100,
    step_ms: StepMs = DEFAULT_STEP_MS,
    repeats: Repeats = 1,
    targets: Targets = None,
    fail_on_kpi: Annotated[bool, typer.Option("--fail-on-kpi", help="Exit 5 when a target is missed (for CI).")] = False,
    baseline: Baseline = None,
    max_regression: MaxRegression = None,
    timeout: Timeout = 60.0,
    run_timeout: RunTimeout = 300.0,
    json_out: JsonFlag = False,
    run: Run = None,  # type: ignore[assignment]
    artifacts_dir: ArtifactsDir = Path("artifacts"),
    loader_flags: dict = None,  # type: ignore[assignment]
) -> None:
    from fwe_cli.measure.cold_warm import MeasurePlan, measure_outcome, run_measure
    from fwe_cli.measure.gate import open_gate

    refuse_heartbeat_dir(loader_flags, "measure")
    config = resolve_config(loader_timeout=timeout, flag_names=FLAG_NAMES, **loader_flags)
    both = not (cold or warm)
    plan = MeasurePlan(cold=cold or both, warm=warm or both, steps=steps, step_ms=step_ms, repeats=repeats,
                       run_timeout=run_timeout, targets=parse_targets(targets))
    gate = open_gate("measure", None if baseline is None else str(baseline), max_regression, config.to_json(),
                     plan.to_dict(), FLAG_NAMES)  # before any run
    out_dir = prepare_output_dir(os.path.join(str(artifacts_dir), "measure", utc_stamp()))
    columns, row = _live_row(plan.step_ms)
    with LiveRuns("fwe measure — runs", ["run", *columns], row, json_out) as live:
        summary = run_measure(config, plan, out_dir, on_run=live.on_run)
    failure = measure_outcome(summary, fail_on_kpi)
    summary["artifact"] = os.path.join(out_dir, "summary.json")  # summary.json is the --json object
    regression = gate.judge(summary)
    outcome = failure or regression  # a measure that failed by itself keeps its own code and error
    record_outcome(summary, outcome)
    write_json(summary["artifact"], summary)
    if json_out:  # the object carries it all; stderr keeps warnings and errors
        run.print_json(summary)
    else:
        console.print(_runs_table(summary))
        console.print(_verdict_table(summary))
        _advice(summary, config.queue_depth, config.warmup_batches)
        console.print(f"artifacts: {escape(out_dir)}")
    print_gate(summary, regression, table=not json_out)  # the deltas; with --json only a lost regression's line
    if outcome is None and not summary["verdict"]["pass"]:
        console.print("[yellow]warning:[/] KPI missed — exit 0 because --fail-on-kpi was not given")
    if outcome is not None:
        raise outcome  # its line and exit code: fwe_command


measure.__doc__ = HELP
EPILOG = MEASURE_EXIT_CODES_HELP

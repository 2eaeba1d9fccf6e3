"""`fwe tune`: sweep doc batch x queue depth (x tokenizer threads), recommend the best, write fwe.env."""

import os
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer
from rich.color import Color
from rich.markup import escape
from rich.style import Style
from rich.table import Table

from fwe_cli.artifacts import prepare_output_dir, utc_stamp, write_json
from fwe_cli.cli.exit_codes import TUNE_EXIT_CODES_HELP, record_outcome
from fwe_cli.cli.live_progress import LiveRuns
from fwe_cli.cli.measure_cmd import refuse_heartbeat_dir
from fwe_cli.cli.options import FLAG_NAMES, ArtifactsDir, JsonFlag, Repeats, RunTimeout, Steps, Targets, Timeout, fwe_command
from fwe_cli.cli.invocation import Run
from fwe_cli.cli.output import console, fmt_ms
from fwe_cli.measure.plan import parse_targets
from fwe_cli.measure.tune_rank import OBJECTIVES, format_value, setting_label
from fwe_cli.measure.tune_warmup import warmup_text

HELP = "\n\n".join([
    "Find the doc batch and queue depth (and, with --threads-grid, tokenizer threads) that serve this node best.",
    "The default objective is the stall fraction against a simulated training step of --step-ms (default 100 ms: "
    "about one step of a GPT-2-small-sized model at batch 8 x 1024 on one GPU; give your training log's step time)."
    " When every setting keeps up with that step the report says so: any serves, and the cheapest is picked. "
    "--objective tokens_per_s ranks the loader's own throughput instead (measured with no step time).",
    "With the stall objective, tune also computes the warmup the recommended setting needed: from each of its trials' "
    "producer timeline (when each batch was ready) and the step time, the smallest NSA_FWE_WARMUP_BATCHES that removes "
    "every stalled step, an NSA_FWE_WARMUP_TIMEOUT with a margin over the time to fill it, and NSA_FWE_Q raised to hold "
    "it; it writes them into fwe.env with the reason (NSA_FWE_WARMUP_BATCHES=0 when none is needed, so that a warmup "
    "set in the environment is switched off), then re-runs the recommended setting with them and reports its "
    "stalled steps (expected 0).",
    "Every trial is one fresh-process steady-state run, the same measurement as `fwe measure`, lasting at least "
    "--steps steps and --trial-s seconds (default 3 s: long enough for a fast loader's figures to settle; the "
    "default sweep of 25 settings x 3 repeats takes about 5 minutes). Trials are "
    "interleaved round by round (A B C, A B C, ...) --repeats times, so drift hits every setting alike; each "
    "setting reports the median and spread of its repeats. The pick maximises --objective among settings whose "
    "median fetch p95 is under target (--targets fetch_p95_ms=..., default 100); settings within noise of the "
    "best (their ranges over the repeats overlap, or medians within 2 % of tokens/s / 1 point of stall) count as "
    "tied, and the tie goes to the one with the most headroom against spikes (the lowest worst stall over its "
    "repeats, then the lowest worst fetch p99), not the least memory: a queued batch costs only its int32 ids "
    "(32 KB at 8 x 1024) while a shallow queue is what a slow Hub read tips over. The report says when the top "
    "settings are indistinguishable.",
    "Grids are comma lists: --doc-batch-grid 16,32,64,128,256 and --q-grid 1,2,4,8,16 (the defaults). The loader "
    "flags --doc-batch N / --q N / --tokenizer-threads N pin that dimension to one value instead (give one or the"
    " other). NSA_FWE_DOC_BATCH / NSA_FWE_Q / NSA_FWE_TOKENIZER_THREADS in the environment are overridden by the "
    "sweep.",
    "--budget-s is a hard limit for the whole sweep: no trial starts unless it is expected to finish in time (the"
    " first always starts); the running trial is finished, not killed; trials not run make the result partial "
    "(exit 6).",
    "Writes artifacts/tune/<UTC>/fwe.env (NAME=value lines: `set -a; . fwe.env; set +a`), summary.json with every"
    " trial, and each trial's run folder. Test hook (for fwe's own tests only): FWE_TEST_SLOW_DOC_BATCH=<doc "
    "batch>:<ms> slows every tokenize call of that doc batch value inside the measured process.",
    "Examples:",
    "  fwe tune --source synthetic --doc-batch-grid 16,64 --q-grid 1,4 --trial-s 2 --budget-s 60",
    "  fwe tune --local-path /data/fwe_bootstrap --tokenizer gpt2 --seq-len 2048 --batch 8 --step-ms 150",
    "  fwe tune --local-path /data/fwe_bootstrap --tokenizer gpt2 --objective tokens_per_s --threads-grid 2,4,8",
    "On a terminal a table fills trial by trial with an ETA; on a pipe only the final report is printed, and with "
    "--json stderr carries only warnings and errors.",
])
EPILOG = TUNE_EXIT_CODES_HELP
NOISE_COLOUR, NEAR_COLOUR, FAR_COLOUR = (70, 160, 80), (200, 170, 60), (190, 60, 60)
"""Cell backgrounds: within noise of the best (one colour); beyond noise, from just past the floor to the scale's
reach (fwe_cli.report.figures.cell_shade)."""


def _colour(shade: float) -> Style:
    if shade == 0.0:
        return Style(color="black", bgcolor=Color.from_rgb(*NOISE_COLOUR))
    r, g, b = (round(a + (z - a) * shade) for a, z in zip(NEAR_COLOUR, FAR_COLOUR))
    return Style(color="black", bgcolor=Color.from_rgb(r, g, b))


def _cell(entry: dict, objective: str) -> str:
    if entry["status"] == "unmeasured":
        return "—"
    if entry["status"] == "failed":
        return "failed"
    if objective == "tokens_per_s":
        text = f"{entry['median'] / 1e6:.2f}M ±{entry['spread_pct'] or 0:.0f}%"
    else:
        text = f"{entry['median']:.1%} ±{100 * entry['spread']:.1f}pt"
    return text + ("" if entry["feasible"] else " !p95")


def _heatmaps(summary: dict) -> list[Table]:
    from fwe_cli.report.figures import cell_shade, tune_heatmaps

    objective, rec = summary["objective"]["name"], summary["recommendation"]
    tables = []
    for heatmap in tune_heatmaps(summary):
        threads = heatmap.threads
        title = f"fwe tune — median {summary['objective']['label']} (doc batch × Q)"
        table = Table(title=title + ("" if threads is None else f", tokenizer threads {threads}"), title_justify="left")
        table.add_column("doc batch \\ Q", justify="right")
        for q in heatmap.queue_depths:
            table.add_column(f"Q={q}", justify="right")
        for row, doc_batch in enumerate(heatmap.doc_batches):
            cells = []
            for col, q in enumerate(heatmap.queue_depths):
                entry = next(e for e in summary["settings"] if e["setting"]["doc_batch"] == doc_batch
                             and e["setting"]["queue_depth"] == q and e["setting"].get("tokenizer_threads") == threads)
                mark = "★ " if rec and entry["setting"] == rec["setting"] else "≈ " if entry["tied_with_best"] else ""
                text = mark + _cell(entry, objective)
                shade = cell_shade(heatmap, row, col)
                cells.append(f"[dim]{text}[/]" if shade is None else f"[{_colour(shade)}]{text}[/]")
            table.add_row(str(doc_batch), *cells)
        tables.append(table)
    return tables


def _legend(summary: dict) -> str:
    """The heat map's marks and its colour scale (the same for every map of the sweep)."""
    from fwe_cli.report.figures import tune_heatmaps

    heatmap = tune_heatmaps(summary)[0]
    scale = ""
    if heatmap.reach is not None:
        unit = "stall points" if heatmap.unit == "points" else f"% {heatmap.label}"
        scale = (f" · colour: green within noise of the best, yellow → red worse beyond it (red: {heatmap.reach:.3g} "
                 f"{unit} worse; noise floor {heatmap.floor:.3g})")
    return ("[dim]★ recommended · ≈ within noise of the best · !p95 fetch p95 over target · ± half the range over "
            f"the repeats{scale}[/]")


def _ranking(summary: dict, top: int = 8) -> Table:
    sign = 1 if summary["objective"]["direction"] == "max" else -1
    measured = sorted((e for e in summary["settings"] if e["status"] == "ok"), key=lambda e: -sign * e["median"])
    table = Table(title=f"ranking (top {min(top, len(measured))} of {len(summary['settings'])})", title_justify="left")
    for column in ("setting", "median", "range over repeats", "n", "fetch p95", "worst p99", "queue fill", "RSS MB",
                   "note"):
        table.add_column(column, justify="left" if column in ("setting", "note") else "right")
    rec = summary["recommendation"]
    objective = OBJECTIVES[summary["plan"]["objective"]]
    for entry in measured[:top]:
        note = ("recommended" if rec and entry["setting"] == rec["setting"] else "within noise of best"
                if entry["tied_with_best"] else "" if entry["feasible"] else "fetch p95 over target")
        spread = f"{format_value(entry['min'], objective, False)} … {format_value(entry['max'], objective, False)}"
        table.add_row(setting_label(entry["setting"]), format_value(entry["median"], objective), spread,
                      str(entry["ok"]), fmt_ms(entry["fetch_p95_ms"]), fmt_ms(entry.get("worst_p99_ms")),
                      "—" if entry["mean_queue_fill"] is None else f"{entry['mean_queue_fill']:.1f}",
                      "—" if entry["peak_rss_mb"] is None else f"{entry['peak_rss_mb']:.0f}", note)
    return table


def _live_row(objective: str) -> tuple[list[str], Callable[[dict], list[str]]]:
    """Columns of the live table after the trial's setting, and how a finished trial fills them."""
    def row(trial: dict) -> list[str]:
        return [str(trial["repeat"] + 1), format_value(trial.get(OBJECTIVES[objective].metric), OBJECTIVES[objective]),
                fmt_ms(trial.get("fetch_p95_ms"))]

    return ["round", "result", "p95"], row


def _warn_test_hooks(summary: dict) -> None:
    if summary["test_hooks"]:
        console.print(f"[yellow]warning:[/] [bold yellow]TEST HOOK ACTIVE[/] {escape(str(summary['test_hooks']))}: these numbers are not "
                      "this node's")


def _report(summary: dict) -> None:
    """Heatmaps, legend, ranking and the recommendation, on stderr."""
    for table in _heatmaps(summary):
        console.print(table)
    console.print(_legend(summary), soft_wrap=True)
    console.print(_ranking(summary))
    _warn_test_hooks(summary)
    rec = summary["recommendation"]
    if rec:
        colour = {"clear": "green", "indistinguishable": "yellow", "low": "red"}[rec["confidence"]]
        console.print(f"recommended: [bold]{escape(rec['label'])}[/]  confidence [{colour}]{rec['confidence']}[/]: "
                      f"{escape(rec['reason'])}", soft_wrap=True)
        for line in warmup_text(summary.get("warmup")):
            console.print(escape(line), soft_wrap=True)
        console.print(rec["export"], soft_wrap=True, markup=False)
        console.print(f"fwe.env: {escape(summary['env_file'])}   summary: {escape(summary['artifact'])}")


@fwe_command(hidden=("heartbeat_dir",))
def tune(
    doc_batch_grid: Annotated[Optional[str], typer.Option("--doc-batch-grid", help="Doc batch values to sweep, comma list (NSA_FWE_DOC_BATCH). Default 16,32,64,128,256.")] = None,
    q_grid: Annotated[Optional[str], typer.Option("--q-grid", help="Queue depths to sweep, comma list (NSA_FWE_Q). Default 1,2,4,8,16.")] = None,
    threads_grid: Annotated[Optional[str], typer.Option("--threads-grid", help="Tokenizer thread counts to sweep, comma list, 0 = per core (NSA_FWE_TOKENIZER_THREADS). Default: not swept.")] = None,
    steps: Steps = 20,
    step_ms: Annotated[Optional[float], typer.Option(min=0, help="Simulated training step (ms) after each batch, what the stall objective is measured against. Default 100 with --objective stall; tokens_per_s measures with none (0).")] = None,
    trial_s: Annotated[float, typer.Option(min=0, help="Seconds of steady state per trial, at least (with at least --steps steps).")] = 3.0,
    repeats: Repeats = 3,
    budget_s: Annotated[float, typer.Option(help="Hard wall-clock limit for the whole sweep, s; running out = partial, exit 6.")] = 900.0,
    objective: Annotated[str, typer.Option(help="stall (minimise the stall fraction at --step-ms) | tokens_per_s (maximise the loader's own throughput).")] = "stall",
    targets: Targets = None,
    timeout: Timeout = 60.0,
    run_timeout: RunTimeout = 120.0,
    json_out: JsonFlag = False,
    run: Run = None,  # type: ignore[assignment]
    artifacts_dir: ArtifactsDir = Path("artifacts"),
    loader_flags: dict = None,  # type: ignore[assignment]
) -> None:
    from fwe_cli.measure.tune import (base_config, fit_to_source, overridden_variables, run_tune, tune_outcome,
                                      tune_plan, write_env_file)

    refuse_heartbeat_dir(loader_flags, "tune")
    pinned = {key: loader_flags.pop(key) for key in ("doc_batch", "queue_depth", "tokenizer_threads")}
    plan = tune_plan(doc_batch_grid, q_grid, threads_grid, pinned, objective=objective, step_ms=step_ms, steps=steps,
                     trial_s=trial_s, repeats=repeats, budget_s=budget_s, run_timeout=run_timeout,
                     targets=parse_targets(targets))
    config = base_config(plan, pinned["tokenizer_threads"], loader_flags, FLAG_NAMES, timeout)
    plan, note = fit_to_source(plan, config, doc_batch_grid is not None, threads_grid is not None)
    if note and not json_out:
        console.print(f"[dim]note: {escape(note)}[/]", soft_wrap=True)
    overridden = overridden_variables(plan)
    if overridden:
        console.print(f"[dim]note: {', '.join(overridden)} in the environment {'is' if len(overridden) == 1 else 'are'} "
                      "overridden by the sweep[/]")
    out_dir = prepare_output_dir(os.path.join(str(artifacts_dir), "tune", utc_stamp()))
    if not json_out:
        console.print(f"[dim]{len(plan.trial_order())} trials ({len(plan.settings())} settings × {repeats} repeats), "
                      f"budget {budget_s:g} s, artifacts {escape(out_dir)}[/]")
    columns, row = _live_row(plan.objective)
    with LiveRuns("fwe tune — trials", ["setting", *columns], row, json_out, budget_s=budget_s) as live:
        summary = run_tune(config, plan, out_dir, on_run=live.on_run)
    summary["artifact"] = os.path.join(out_dir, "summary.json")
    summary["env_file"] = write_env_file(os.path.join(out_dir, "fwe.env"), summary) if summary["recommendation"] else None
    outcome = tune_outcome(summary)
    record_outcome(summary, outcome)  # summary.json is the --json object
    write_json(summary["artifact"], summary)
    if json_out:  # the object carries it all; stderr keeps warnings and errors
        run.print_json(summary)
        _warn_test_hooks(summary)
    else:
        _report(summary)
    if outcome is not None:
        raise outcome  # its line and exit code: fwe_command


tune.__doc__ = HELP

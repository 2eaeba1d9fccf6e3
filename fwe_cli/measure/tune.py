"""Tuning sweep: which doc batch, queue depth (and tokenizer thread count) serve this node best.

Every trial is one `fwe_cli.measure.cold_warm.spawn_run` — the same fresh-process measurement as `fwe measure`, steady
state over `steps` steps — with one setting. Trials run round by round (A B C, A B C, ...) so slow drift on the
node hits every setting alike, and a sweep cut short by its budget still covers every setting once it has
finished round 1. The ranking rule lives in `fwe_cli.measure.tune_rank`; the warmup the recommended setting needs
(from its trials' producer timelines), and the run that verifies it, in `fwe_cli.measure.tune_warmup`. Run it as
`fwe tune` (fwe_cli/cli/tune_cmd.py):

    fwe tune --source synthetic --doc-batch-grid 16,64 --q-grid 1,4 --trial-s 2 --budget-s 60

Budget: a trial starts only while the elapsed time plus the median duration of the trials so far fits in
budget_s (the first trial always starts); a trial that is running when the budget ends is finished, never
killed (each is bounded by run_timeout). Trials not run make the result partial.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from fwe_cli.artifacts import provenance, utc_iso, write_output
from fwe_cli.errors import ConfigError, FweError, Partial, SettingError, TrialFailed
from fwe_cli.loader.config import LoaderConfig, resolve_config
from fwe_cli.loader.variables import ENV_VARS, env_snapshot
from fwe_cli.loader.limits import check_limit
from fwe_cli.measure.child import TEST_HOOK_VARS
from fwe_cli.measure.cold_warm import failed_runs, spawn_run
from fwe_cli.measure.plan import DEFAULT_STEP_MS, RunEvent, RunPlan
from fwe_cli.measure.tune_rank import OBJECTIVES, RULE, format_value, rank_settings, recommend, setting_label
from fwe_cli.measure.tune_warmup import tune_warmup, warmup_text

DEFAULT_DOC_BATCHES = (16, 32, 64, 128, 256)
DEFAULT_QUEUE_DEPTHS = (1, 2, 4, 8, 16)


def _summed(counts) -> dict[str, int] | None:
    """The trials' Hub requests by kind (hub_env.hub_requests), added up; None when no trial counted any."""
    total: dict[str, int] = {}
    for each in counts:
        for name, count in (each or {}).items():
            total[name] = total.get(name, 0) + count
    return total or None


def parse_grid(text: str, flag: str, field: str) -> tuple[int, ...]:
    """'16,32,64' -> (16, 32, 64), sorted, each within the limits of the config `field` it sweeps; ConfigError naming
    the flag and the bad entry."""
    values = []
    for item in (part.strip() for part in text.split(",")):
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(f"{flag} entry {item!r} is not an integer (give a comma list like 16,32,64)") from None
        check_limit(field, value, f"{flag} entry", repr(item))
        if value in values:
            raise ConfigError(f"{flag} lists {value} twice")
        values.append(value)
    return tuple(sorted(values))


def _check_grid(name: str, grid, field: str) -> None:
    if not isinstance(grid, tuple) or not grid:
        raise ConfigError(f"{name} must be a non-empty tuple of integers, got {grid!r}")
    for value in grid:
        check_limit(field, value, f"{name} entry")
    if len(set(grid)) != len(grid):
        raise ConfigError(f"{name} lists a value twice: {grid!r}")


@dataclass(frozen=True)
class TunePlan(RunPlan):
    """What `fwe tune` sweeps and how carefully (steps, step_ms, targets: as for every measured run)."""

    steps: int = 20
    """Steady-state steps per trial, at least (a trial also lasts at least trial_s)."""
    trial_s: float = 3.0
    """Seconds of steady state per trial, at least: at the default 100 ms step that is 30 steps; loader-bound
    (--objective tokens_per_s) it is thousands of batches, where 200 steps of a fast loader were over in ~0.1 s
    and noise decided the ranking."""
    repeats: int = 3
    """Trials per setting, interleaved round by round."""
    run_timeout: float = 120.0
    """Seconds one trial (a subprocess) may take before it is killed and counted as failed."""
    doc_batches: tuple = DEFAULT_DOC_BATCHES
    """Doc batch values (NSA_FWE_DOC_BATCH) to try."""
    queue_depths: tuple = DEFAULT_QUEUE_DEPTHS
    """Prefetch queue depths (NSA_FWE_Q) to try."""
    threads: tuple | None = None
    """Tokenizer thread counts (NSA_FWE_TOKENIZER_THREADS, 0 = per core) to try; None keeps the config's value."""
    budget_s: float = 900.0
    """Wall-clock limit for the whole sweep, seconds."""
    objective: str = "stall"
    """'stall' (minimise the stall fraction at step_ms, the training step) or 'tokens_per_s' (maximise the loader's
    own throughput, measured with step_ms 0)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_grid("doc_batches", self.doc_batches, "doc_batch")
        _check_grid("queue_depths", self.queue_depths, "queue_depth")
        if self.threads is not None:
            _check_grid("threads", self.threads, "tokenizer_threads")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}; got {self.objective!r}")
        if self.objective == "stall" and self.step_ms == 0:
            raise ConfigError("objective 'stall' needs --step-ms > 0: with no compute per step every setting "
                              "stalls ~100 % of the time; give your real step time")
        if self.objective == "tokens_per_s" and self.step_ms:
            raise ConfigError(f"objective 'tokens_per_s' ranks the loader's own throughput, measured with no step "
                              f"time, but --step-ms is {self.step_ms:g}: drop --step-ms, or use --objective stall")
        check_limit("budget_s", self.budget_s, "--budget-s")

    def settings(self) -> list[dict]:
        """Every setting of the grid, threads outermost, then doc batch, then Q (the order of a round)."""
        threads = self.threads if self.threads is not None else (None,)
        return [{"doc_batch": d, "queue_depth": q, **({} if t is None else {"tokenizer_threads": t})}
                for t in threads for d in self.doc_batches for q in self.queue_depths]

    def trial_order(self) -> list[tuple[int, dict]]:
        """(repeat, setting) pairs: round 1 over every setting, then round 2, ..."""
        return [(repeat, setting) for repeat in range(self.repeats) for setting in self.settings()]


def _grid(given: str | None, pinned: int | None, flag: str, pin_flag: str, default: tuple, field: str) -> tuple:
    """One dimension of the sweep: its grid flag's values, or the one value its loader flag pins, or the default."""
    if given is not None and pinned is not None:
        raise ConfigError(f"give either {flag} (a sweep) or {pin_flag} (one value), not both")
    if given is not None:
        return parse_grid(given, flag, field)
    if pinned is None:
        return default
    check_limit(field, pinned, pin_flag)
    return (pinned,)


def tune_plan(doc_batch_grid: str | None, q_grid: str | None, threads_grid: str | None, pinned: dict,
              objective: str = "stall", step_ms: float | None = None, **knobs) -> TunePlan:
    """The sweep `fwe tune` was asked for: each dimension from its grid flag (--doc-batch-grid, --q-grid,
    --threads-grid) or the loader flag that pins it (`pinned`: doc_batch, queue_depth, tokenizer_threads; never
    both), and the step time defaulting per objective (stall: against a training step of DEFAULT_STEP_MS;
    tokens_per_s: none). `knobs`: the other TunePlan fields, as given."""
    if step_ms is None:
        step_ms = 0.0 if objective == "tokens_per_s" else DEFAULT_STEP_MS
    if threads_grid is not None and pinned.get("tokenizer_threads") is not None:  # a pinned count stays in the config
        raise ConfigError("give either --threads-grid (a sweep) or --tokenizer-threads (one value), not both")
    return TunePlan(
        doc_batches=_grid(doc_batch_grid, pinned.get("doc_batch"), "--doc-batch-grid", "--doc-batch",
                          DEFAULT_DOC_BATCHES, "doc_batch"),
        queue_depths=_grid(q_grid, pinned.get("queue_depth"), "--q-grid", "--q", DEFAULT_QUEUE_DEPTHS, "queue_depth"),
        threads=None if threads_grid is None else parse_grid(threads_grid, "--threads-grid", "tokenizer_threads"),
        objective=objective, step_ms=step_ms, **knobs)


def base_config(plan: TunePlan, pinned_threads: int | None, loader_flags: dict, flag_names: dict[str, str],
                timeout: float) -> LoaderConfig:
    """The config every trial starts from (flag > NSA_FWE_* variable > default, as `resolve_config` applies them); a
    setting the rest of it cannot take fails here, before any trial, named as the user typed it (a grid entry,
    else the flag of `flag_names`)."""
    # A grid point for the swept fields, so an NSA_FWE_Q/NSA_FWE_DOC_BATCH in the environment (overridden anyway)
    # cannot make it invalid; each trial sets its own values.
    threads = plan.threads
    config = resolve_config(loader_timeout=timeout, doc_batch=plan.doc_batches[0], queue_depth=plan.queue_depths[-1],
                            tokenizer_threads=threads[0] if threads else pinned_threads, flag_names=flag_names,
                            **loader_flags)
    grid_flags = {"doc_batch": "--doc-batch-grid entry", "queue_depth": "--q-grid entry",
                  "tokenizer_threads": "--threads-grid entry"}
    try:
        trial_configs(config, plan)
    except SettingError as exc:
        raise exc.naming(lambda field: grid_flags.get(field) or flag_names.get(field, field)) from None
    return config


def fit_to_source(plan: TunePlan, config: LoaderConfig, doc_batch_swept: bool,
                  threads_swept: bool) -> tuple[TunePlan, str | None]:
    """The plan for what the source is: a source read as token ids (a token directory) runs no tokenizer, so doc batch
    and tokenizer threads change nothing and only Q is swept (their grid flags are refused: they would measure noise
    under other names). Returns the plan and a note saying so, or the plan unchanged and None."""
    from dataclasses import replace

    from fwe_cli.loader.sources.registry import open_source

    source = open_source(config.source, config.read_options())
    if not source.reads_tokens:
        return plan, None
    if doc_batch_swept or threads_swept:
        flag = "--doc-batch-grid" if doc_batch_swept else "--threads-grid"
        raise ConfigError(f"{flag} sweeps how documents are tokenized, and {source.location(config.source)} is read as "
                          "token ids (no tokenizer runs): drop it and sweep --q-grid only")
    note = (f"{source.location(config.source)} is read as token ids (no tokenizer runs): doc batch and tokenizer "
            f"threads change nothing, so only Q is swept (doc batch stays {config.doc_batch})")
    return replace(plan, doc_batches=(config.doc_batch,)), note


def overridden_variables(plan: TunePlan) -> list[str]:
    """The NSA_FWE_* variables set in the environment that the sweep overrides (it sets the fields it sweeps)."""
    swept = ["doc_batch", "queue_depth"] + (["tokenizer_threads"] if plan.threads else [])
    return [var for var, field in ENV_VARS.items() if field in swept and os.environ.get(var, "").strip()]


def trial_configs(base: LoaderConfig, plan: TunePlan) -> dict[str, LoaderConfig]:
    """label -> the base config with that setting applied; ConfigError up front for a setting the base cannot take."""
    return {setting_label(s): dataclasses.replace(base, **s) for s in plan.settings()}


def run_tune(base: LoaderConfig, plan: TunePlan, out_dir: str, on_run: Callable[[RunEvent], None] = lambda e: None,
             clock: Callable[[], float] = time.monotonic) -> dict:
    """Run the sweep within plan.budget_s; write each trial's files under out_dir; return the summary (unwritten).
    `on_run` hears each trial start and end (live progress)."""
    objective = OBJECTIVES[plan.objective]
    order = plan.trial_order()
    configs = trial_configs(base, plan)
    started = utc_iso()
    t0 = clock()
    trials: list[dict] = []
    stopped = None
    for index, (repeat, setting) in enumerate(order):
        elapsed = clock() - t0
        expected = statistics.median(t["duration_s"] for t in trials) if trials else 0.0
        if trials and elapsed + expected > plan.budget_s:
            stopped = (f"budget: {elapsed:.1f} s of {plan.budget_s:g} s used; the next trial takes ~{expected:.1f} s; "
                       f"{len(order) - index} of {len(order)} trials not run")
            break
        label = setting_label(setting)
        run_dir = os.path.join(out_dir, f"trial{index:03d}-r{repeat}-" + label.replace("=", "").replace(" ", "-"))
        begin = clock()
        on_run(RunEvent("start", index, len(order), label))
        record = spawn_run(configs[label], "trial", run_dir, plan)
        duration = clock() - begin
        trials.append({"index": index, "repeat": repeat, "setting": setting, "started_s": round(begin - t0, 3),
                       "duration_s": round(duration, 3), **record})
        on_run(RunEvent("done", index, len(order), label, trials[-1]))
    target = plan.targets["fetch_p95_ms"]
    ranked = rank_settings(plan.settings(), trials, objective, target)
    recommendation = recommend(ranked, objective, target, swept_threads=plan.threads is not None,
                               step_ms=plan.step_ms)
    warmup = tune_warmup(base, plan, recommendation, trials, out_dir, stopped, clock() - t0, spawn_run)
    elapsed = clock() - t0
    return {
        "recommendation": recommendation,
        "partial": len(trials) < len(order),
        "budget": {"budget_s": plan.budget_s, "elapsed_s": round(elapsed, 3), "trials_planned": len(order),
                   "trials_run": len(trials), "stopped": stopped},
        "objective": {"name": plan.objective, "metric": objective.metric,
                      "direction": "max" if objective.sign > 0 else "min", "label": objective.label},
        "rule": RULE,
        "warmup": warmup,
        "settings": ranked,
        "trials": trials,
        "hub_requests": _summed(trial.get("hub_requests") for trial in trials),
        "plan": plan.to_dict(), "targets": plan.targets,
        "config": base.to_json(), "env": env_snapshot(),
        "test_hooks": {var: os.environ[var] for var in TEST_HOOK_VARS if os.environ.get(var)},
        **provenance(), "started": started, "finished": utc_iso(),
    }


def tune_outcome(summary: dict) -> FweError | None:
    """Why `fwe tune` ends badly: failed trials, or none that succeeded (TrialFailed); else a budget that ran out
    before every trial ran (Partial); None when every trial ran."""
    failure = failed_runs(TrialFailed, summary["trials"], "trials")
    if failure is None and summary["recommendation"] is None:
        failure = TrialFailed(f"0 of {len(summary['trials'])} trials failed; first: none ran", [])
    if failure is None and summary["partial"]:
        failure = Partial(summary["budget"]["stopped"])
    return failure


def env_file_text(summary: dict) -> str:
    """fwe.env: comment lines, then NAME=value lines (source with `set -a; . fwe.env; set +a`, docker --env-file,
    systemd EnvironmentFile=). Raises ConfigError when there is no recommendation to write."""
    rec = summary["recommendation"]
    if rec is None:
        raise ConfigError("no recommendation: no setting was measured successfully")
    budget = summary["budget"]
    state = "PARTIAL — " + (budget["stopped"] or "") if summary["partial"] else "complete"
    lines = [
        f"# fwe tune {summary['finished']} on {summary['host']['hostname']}: {rec['label']}",
        f"# objective {summary['objective']['name']}: median {format_value(rec['median'], OBJECTIVES[summary['plan']['objective']])}, "
        f"fetch p95 {rec['fetch_p95_ms']:.1f} ms; "
        f"{budget['trials_run']}/{budget['trials_planned']} trials ({state})",
        f"# confidence: {rec['confidence']} — {rec['reason']}",
        "# apply: set -a; . ./fwe.env; set +a   (or docker run --env-file fwe.env, systemd EnvironmentFile=)",
    ]
    lines += [f"# {line}" for line in warmup_text(summary.get("warmup"))]
    if summary.get("test_hooks"):
        lines.append(f"# WARNING: measured with test hooks active: {summary['test_hooks']}")
    lines += [f"{name}={value}" for name, value in rec["env"].items()]
    return "\n".join(lines) + "\n"


def write_env_file(path: str, summary: dict) -> str:
    """Write fwe.env atomically (temporary file, then rename)."""
    return write_output(path, env_file_text(summary).encode("utf-8"))

"""The regression gate: a run's figures against a previous artifact of the same command (the last good run).

`load_baseline` reads and vets that artifact (a smoke artifact, or a measure summary: the objects --json prints),
`check_same_work` refuses one made with another shape of work (its figures would not be comparable), and `compare`
says, metric by metric, whether this run is worse than the baseline by more than the bound. Noise-aware: each side
is the median of its runs; with several runs on both sides (measure --repeats) a metric regresses only when the
ranges do not overlap as well; and a change under an absolute floor never counts.
"""

from __future__ import annotations

import math
import statistics
from typing import Mapping

import orjson

from fwe_cli.errors import CheckFailed, ConfigError, os_error_line
from fwe_cli.loader.limits import check_limit

DEFAULT_MAX_REGRESSION_PCT = 10.0
# Absolute floors: a change smaller than this never regresses, whatever its percentage. Small figures swing by large
# percentages on a shared CI machine: a smoke's 30 ms first batch at 45 ms is +50 % of scheduler noise, and a measure
# run's fresh process (interpreter start and imports, ~0.2 s) takes 0.05-0.1 s longer on a runner busy with other
# jobs. The floors sit above that jitter and far below anything a training job notices (its first-batch targets are
# seconds; a fetch p95 under a millisecond stays hidden behind any training step).
FIRST_BATCH_FLOOR_S = 0.1
FETCH_P95_FLOOR_MS = 1.0
# A smoke's fetch p95 is over the batches it pulled (--batches, default 3): over a few it is just the slowest fetch,
# and up to ~100 it is still set by the fetches that waited while the queue first filled (start-up, 4-17 ms where
# the steady state is 0.1 ms on a 2-CPU runner). Below this many fetches it is not compared (and the notes say so).
P95_MIN_FETCHES = 200

# metric -> (worse_is, absolute floor or None, unit); the floor is in the metric's unit
METRICS: dict[str, tuple[str, float | None, str]] = {
    "first_batch_s": ("higher", FIRST_BATCH_FLOOR_S, "s"),
    "cold_first_batch_s": ("higher", FIRST_BATCH_FLOOR_S, "s"),
    "warm_first_batch_s": ("higher", FIRST_BATCH_FLOOR_S, "s"),
    "fetch_p95_ms": ("higher", FETCH_P95_FLOOR_MS, "ms"),
    "tokens_per_s": ("lower", None, "tokens/s"),
}
KIND_METRICS = {"smoke": ("first_batch_s", "tokens_per_s", "fetch_p95_ms"),
                "measure": ("cold_first_batch_s", "warm_first_batch_s", "fetch_p95_ms", "tokens_per_s")}
# The shape of the work: a baseline that differs in one of these measured something else, so it is refused.
SAME_CONFIG = ("source", "tokenizer", "seq_len", "batch_size")
SAME_PLAN = {"measure": ("step_ms", "steps")}
# Config fields that only label or route telemetry: a difference there is not worth a note.
QUIET_CONFIG = ("heartbeat_dir", "rank", "shard_from")
HOST_FACTS = ("cpus_usable", "ram_total_gb")
# A run that failed only these ways still measured real figures: it may serve as a baseline.
FIGURES_STAND = ("Regression", "KpiMissed")
ARTIFACT = {"smoke": "a fwe smoke artifact (artifacts/smoke/<UTC>.json)",
            "measure": "a fwe measure summary (artifacts/measure/<UTC>/summary.json)"}


def artifact_kind(record: dict) -> str | None:
    """Which command wrote this artifact (None: neither)."""
    if {"runs", "verdict"} <= record.keys():
        return "measure"
    if {"first_batch_s", "checks", "shape"} <= record.keys():
        return "smoke"
    if {"first_batch_s", "fallback", "config"} <= record.keys() and record.get("error"):
        return "smoke"  # smoke's watchdog writes a hung run's artifact before any check or shape exists
    return None


def _failure(record: dict, kind: str) -> str | None:
    """Why the run behind this artifact failed (None when its figures stand)."""
    from fwe_cli.measure.cold_warm import first_failure

    error = record.get("error")
    if isinstance(error, dict) and error.get("type") not in FIGURES_STAND:
        return first_failure([record])
    if kind == "smoke":
        failed = [str(c.get("name")) for c in record.get("checks") or [] if isinstance(c, dict) and not c.get("ok")]
        if failed or (record.get("ok") is False and not isinstance(error, dict)):
            return str(CheckFailed(failed))
    return None


def load_baseline(path: str, kind: str) -> dict:
    """The artifact at `path`, checked to be a good run of fwe `kind` ('smoke' or 'measure') with figures;
    ConfigError (one line naming the path and the problem) otherwise."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(os_error_line("read --baseline", path, exc)) from None
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"--baseline {path} is not JSON ({exc}): give {ARTIFACT[kind]}") from None
    if not isinstance(record, dict):
        raise ConfigError(f"--baseline {path} holds a JSON {type(record).__name__}, not {ARTIFACT[kind]}")
    found = artifact_kind(record)
    if found is None and {"command", "error"} <= record.keys():
        raise ConfigError(f"--baseline {path} is the error object of a fwe {record.get('command')} run that ended "
                          f"before its result (exit {record.get('exit_code')}): give {ARTIFACT[kind]}")
    if found != kind:
        what = ARTIFACT[found] if found else "not an artifact of fwe smoke or fwe measure"
        raise ConfigError(f"--baseline {path} is {what}; fwe {kind} compares against {ARTIFACT[kind]}")
    failure = _failure(record, kind)
    if failure:
        raise ConfigError(f"--baseline {path} is a failed run (exit {record.get('exit_code')}, {failure}): give "
                          "the artifact of a run that succeeded")
    if not isinstance(record.get("config"), dict):
        raise ConfigError(f"--baseline {path} has no config: give {ARTIFACT[kind]} as fwe wrote it")
    if kind == "measure" and not isinstance(record.get("plan"), dict):
        raise ConfigError(f"--baseline {path} has no plan: give {ARTIFACT[kind]} as fwe wrote it")
    if not any(figures(kind, record).values()):
        raise ConfigError(f"--baseline {path} has no figures (no first batch, no tokens/s): give the artifact of a "
                          "run that succeeded")
    return record


def check_max_regression(value: float) -> None:
    """The bound's range (LIMITS["max_regression"]); the error names --max-regression and what was typed."""
    check_limit("max_regression", value, "--max-regression")


def check_same_work(kind: str, baseline: dict, config: dict, plan: dict | None = None, path: str | None = None,
                    flags: Mapping[str, str] | None = None) -> None:
    """ConfigError naming the field (and its flag, from `flags`: config field -> flag) and both values when the
    baseline's work differs in shape from this run's."""
    where = f"--baseline {path}" if path else "the baseline"
    flags = flags or {}
    pairs = [(f"config {name}" + (f" ({flags[name]})" if name in flags else ""),
              _setting(baseline.get("config") or {}, name), _setting(config, name)) for name in SAME_CONFIG]
    pairs += [(f"plan {name} (--{name.replace('_', '-')})", (baseline.get("plan") or {}).get(name),
               (plan or {}).get(name)) for name in SAME_PLAN.get(kind, ())]
    for field, then, now in pairs:
        if then != now:
            same = ", ".join(SAME_CONFIG + SAME_PLAN.get(kind, ()))
            raise ConfigError(f"{where} was made with {field} {then!r}, this run has {now!r}: its figures measure "
                              f"other work (compare runs with the same {same})")


def _setting(config: dict, name: str):
    """A config's setting as the gate compares it: the source by its kind (an artifact records the source as its
    spec, one of an fwe before source trees as the kind itself)."""
    value = config.get(name)
    return value.get("kind") if name == "source" and isinstance(value, dict) else value


def _number(value) -> float | None:
    """A finite number as float, else None (a hand-edited baseline may hold anything there)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _values(*candidates) -> list[float]:
    return [v for v in (_number(c) for c in candidates) if v is not None]


def figures(kind: str, record: dict) -> dict[str, list[float]]:
    """metric -> the values this artifact holds for it (one per successful run; empty when it has none)."""
    if kind == "smoke":
        loader = record.get("loader") if isinstance(record.get("loader"), dict) else {}
        enough = (_number(loader.get("steps")) or 0) >= P95_MIN_FETCHES
        return {"first_batch_s": _values(record.get("first_batch_s")),
                "tokens_per_s": [v for v in _values(record.get("tokens_per_s")) if v > 0],  # 0: no batch pulled
                "fetch_p95_ms": _values(loader.get("fetch_p95_ms")) if enough else []}
    # measure: the successful runs, as `cold_warm.verdict` counts them (a prime run only fills the caches)
    runs = [r for r in record.get("runs") or []
            if isinstance(r, dict) and not r.get("error") and r.get("kind") != "prime"]
    return {"cold_first_batch_s": _values(*(r.get("first_batch_s") for r in runs if r.get("kind") == "cold")),
            "warm_first_batch_s": _values(*(r.get("first_batch_s") for r in runs if r.get("kind") == "warm")),
            "fetch_p95_ms": _values(*(r.get("fetch_p95_ms") for r in runs)),
            "tokens_per_s": [v for v in _values(*(r.get("tokens_per_s") for r in runs)) if v > 0]}


def _skip_note(kind: str, metric: str, baseline: dict, current: dict, in_baseline: bool) -> str:
    """Why `metric` is not compared: which side lacks it (and, for a smoke's fetch p95, that it had too few)."""
    side, record = ("this run", current) if in_baseline else ("the baseline", baseline)
    if kind == "smoke" and metric == "fetch_p95_ms":
        loader = record.get("loader") if isinstance(record.get("loader"), dict) else {}
        if _number(loader.get("fetch_p95_ms")) is not None:
            return (f"fetch_p95_ms: skipped, {side} pulled {loader.get('steps')} batches (a p95 needs "
                    f"{P95_MIN_FETCHES}: raise --batches)")
    if not in_baseline and not figures(kind, current)[metric]:
        return f"{metric}: skipped, measured by neither run"
    return f"{metric}: skipped, not in {side}"


def check_metric(metric: str, then: list[float], now: list[float], bound_pct: float) -> dict:
    """One metric's check: median rule, non-overlap with several values on both sides, absolute floor."""
    worse_is, floor, unit = METRICS[metric]
    sign = 1 if worse_is == "higher" else -1
    b_med, c_med = statistics.median(then), statistics.median(now)
    delta_pct = (c_med - b_med) / b_med * 100 if b_med else None
    # how much worse this run is, in % of the baseline (an increase from a baseline of 0 is worse past any bound)
    worse_pct = sign * delta_pct if delta_pct is not None else (math.inf if sign * c_med > 0 else 0.0)
    regressed, note = worse_pct > bound_pct, ""
    if regressed and floor is not None and abs(c_med - b_med) < floor:
        regressed, note = False, f"change {abs(c_med - b_med):.3g} {unit} is under the {floor:g} {unit} floor (noise)"
    elif regressed and len(then) >= 2 and len(now) >= 2:
        apart = min(now) > max(then) if worse_is == "higher" else max(now) < min(then)
        if not apart:
            regressed = False
            note = (f"median worse by {worse_pct:.1f} %, but the ranges overlap ({len(now)} runs vs the baseline's "
                    f"{len(then)}): noise")
    if regressed:
        note = f"worse by {worse_pct:.1f} % > {bound_pct:g} %" if math.isfinite(worse_pct) else "baseline was 0"
    return {"metric": metric, "baseline": b_med, "current": c_med,
            "delta_pct": None if delta_pct is None else round(delta_pct, 2), "bound_pct": bound_pct,
            "worse_is": worse_is, "n_baseline": len(then), "n_current": len(now), "pass": not regressed,
            "note": note}


def _differences(kind: str, baseline: dict, current: dict) -> list[str]:
    """Allowed differences (settings, plan, host, fwe version), one note each: the user may be testing a change."""
    notes = []
    sections = [("config", (set(SAME_CONFIG) - {"source"}) | set(QUIET_CONFIG))]  # same source kind, other options
    if kind == "measure":
        sections.append(("plan", set(SAME_PLAN["measure"])))
    for section, skip in sections:
        then, now = baseline.get(section) or {}, current.get(section) or {}
        for name in sorted((then.keys() | now.keys()) - skip):
            if then.get(name) != now.get(name):
                notes.append(f"{section} {name}: {then.get(name)!r} in the baseline, {now.get(name)!r} now")
    then_host, now_host = baseline.get("host") or {}, current.get("host") or {}
    for name in HOST_FACTS:
        if then_host.get(name) != now_host.get(name):
            notes.append(f"host {name}: {then_host.get(name)!r} in the baseline, {now_host.get(name)!r} now "
                         "(figures from other hardware)")
    if baseline.get("fwe_version") != current.get("fwe_version"):
        notes.append(f"fwe_version: {baseline.get('fwe_version')!r} in the baseline, "
                     f"{current.get('fwe_version')!r} now")
    return notes


def compare(kind: str, baseline: dict, current: dict, max_regression_pct: float, path: str | None = None) -> dict:
    """This run (`current`, the artifact being written) against `baseline` (from load_baseline): the JSON-able
    record {baseline, max_regression_pct, checks: [...], pass, notes}. `path`: where the baseline was read from
    (default: the path the baseline artifact records for itself)."""
    check_max_regression(max_regression_pct)
    check_same_work(kind, baseline, current.get("config") or {}, current.get("plan"), path)
    then, now = figures(kind, baseline), figures(kind, current)
    checks, notes = [], []
    for metric in KIND_METRICS[kind]:
        if then[metric] and now[metric]:
            checks.append(check_metric(metric, then[metric], now[metric], max_regression_pct))
        else:
            notes.append(_skip_note(kind, metric, baseline, current, bool(then[metric])))
    if not checks:
        notes.append("nothing to compare: no metric is present on both sides")
    notes += _differences(kind, baseline, current)
    return {"baseline": path or baseline.get("artifact"), "max_regression_pct": max_regression_pct, "checks": checks,
            "pass": all(check["pass"] for check in checks), "notes": notes}


def regression_message(record: dict) -> str:
    """'<metric> <worse %> worse than baseline (bound X %)' for each regressed metric, '; '-joined."""
    parts = []
    for check in record["checks"]:
        if not check["pass"]:
            delta = check["delta_pct"]
            worse = "∞" if delta is None else f"{abs(delta):.1f}"
            parts.append(f"{check['metric']} {worse} % worse than baseline (bound {check['bound_pct']:g} %)")
    return "; ".join(parts)

"""Rank the settings a tuning sweep measured and pick one, saying how sure the pick is.

Pure functions over trial records (no processes, no clock), so the rule is testable on made-up numbers.
`fwe_cli.measure.tune` runs the trials and calls `rank_settings` then `recommend`.

The rule (RULE, also written into every summary):
1. A setting counts only if every trial of it ran without error; its figure is the median over its repeats.
2. Feasible: median fetch p95 below the fetch_p95_ms target. If none is feasible, all measured settings are
   ranked and the recommendation says it misses the target.
3. Best: the feasible setting with the best median objective.
4. Within noise of the best: its range over the repeats overlaps the best's range (its best repeat reaches
   the best's worst repeat), or the medians differ by less than the floor (tokens/s: 2 % of the best; stall:
   1 percentage point). With 3 repeats each, non-overlapping ranges (all three of one above all three of the
   other) is the most extreme rank order there is: a one-sided Mann-Whitney p of 1/20 = 0.05 — the least
   evidence that can call two settings different at the usual 5 % level. Two settings drawn from the same
   distribution overlap 90 % of the time, so the rule errs toward "tied"; a tie goes to the cheaper setting.
5. Among the settings within noise of the best, recommend the one with the most headroom against spikes: the
   lowest worst stall over its repeats, then the lowest worst fetch p99; only then the one using least memory
   (smallest Q, then doc batch, then tokenizer threads). Settings that all keep up differ in how close their worst
   moment came to the step, and that is what a slow Hub read tips over; memory is no reason to prefer a shallower
   queue: a queued batch costs only its int32 ids (32 KB at batch 8 x 1024).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fwe_cli.loader.variables import ENV_VARS


@dataclass(frozen=True)
class Objective:
    """What a sweep optimises."""

    metric: str
    """Key of the trial record holding the figure (a steady-state statistic of `spawn_run`)."""
    sign: int
    """+1 when bigger is better, -1 when smaller is better."""
    floor_rel: float
    """Differences below this fraction of the best median count as noise (a change not worth making)."""
    floor_abs: float
    """Differences below this absolute amount count as noise."""
    label: str
    """How the figure is named for people."""


OBJECTIVES = {
    "tokens_per_s": Objective("tokens_per_s", +1, 0.02, 0.0, "tokens/s"),
    "stall": Objective("stall_fraction", -1, 0.0, 0.01, "stall fraction"),
}
RULE = (
    "median over repeats; only settings with every trial ok; feasible = median fetch p95 below target; "
    "within noise of the best = ranges over repeats overlap, or medians differ by less than the floor "
    "(tokens/s: 2 % of the best; stall: 1 point); among those, the most headroom against spikes wins: lowest "
    "worst stall over the repeats, then lowest worst fetch p99, then least memory (smallest Q, doc batch, threads)"
)
SETTING_ENV = {field: var for var, field in ENV_VARS.items()}  # doc_batch -> NSA_FWE_DOC_BATCH, ...


def memory_key(setting: dict) -> tuple:
    """Smaller sorts first = less memory held: queue depth, then doc batch, then tokenizer threads."""
    return (setting["queue_depth"], setting["doc_batch"], setting.get("tokenizer_threads") or 0)


def headroom_key(entry: dict) -> tuple:
    """Smaller sorts first = more headroom against spikes: worst stall over the repeats, worst fetch p99, then
    memory (a figure not measured counts as none)."""
    return (entry.get("worst_stall") or 0.0, entry.get("worst_p99_ms") or 0.0, memory_key(entry["setting"]))


def setting_label(setting: dict) -> str:
    parts = [f"doc_batch={setting['doc_batch']}", f"Q={setting['queue_depth']}"]
    if "tokenizer_threads" in setting:
        parts.append(f"threads={setting['tokenizer_threads']}")
    return " ".join(parts)


def format_value(value: float | None, objective: Objective, units: bool = True) -> str:
    """3.83 M tokens/s, 12,400 tokens/s, or 3.1 % stall (without units: 3.83 M, 12,400, 3.1 %)."""
    if value is None:
        return "—"
    if objective.metric == "stall_fraction":
        return f"{100 * value:.1f} %" + (" stall" if units else "")
    text = f"{value / 1e6:.2f} M" if value >= 1e5 else f"{value:,.0f}"
    return text + (" tokens/s" if units else "")


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(float(statistics.median(values)), 6) if values else None


def rank_settings(settings: list[dict], trials: list[dict], objective: Objective, p95_target_ms: float) -> list[dict]:
    """One entry per setting (in grid order): repeats' values, median, spread, status, feasibility."""
    ranked = []
    for setting in settings:
        mine = [t for t in trials if t["setting"] == setting]
        good = [t for t in mine if not t.get("error") and t.get(objective.metric) is not None]
        values = [t[objective.metric] for t in good]
        entry = {
            "setting": setting, "trials": len(mine), "ok": len(good), "failed": len(mine) - len(good),
            "values": values, "median": _median(values),
            "min": min(values) if values else None, "max": max(values) if values else None,
            "spread": round((max(values) - min(values)) / 2, 6) if values else None,
            **{key: _median([t.get(key) for t in good])
               for key in ("fetch_p95_ms", "tokens_per_s", "stall_fraction", "peak_rss_mb", "mean_queue_fill")},
            **{f"worst_{name}": _worst([t.get(key) for t in good])
               for name, key in (("stall", "stall_fraction"), ("p99_ms", "fetch_p99_ms"),
                                 ("stalled_steps", "stalled_steps"))},
        }
        entry["spread_pct"] = (round(100 * entry["spread"] / abs(entry["median"]), 2)
                               if values and entry["median"] else None)
        if not mine:
            entry["status"] = "unmeasured"
        elif entry["failed"]:
            entry["status"] = "failed"
        else:
            entry["status"] = "ok"
        entry["feasible"] = (entry["status"] == "ok" and entry["fetch_p95_ms"] is not None
                             and entry["fetch_p95_ms"] < p95_target_ms)
        entry["tied_with_best"] = False
        ranked.append(entry)
    return ranked


def _worst(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def _score(entry: dict, objective: Objective) -> float:
    return objective.sign * entry["median"]


def noise_floor(best_median: float, objective: Objective) -> float:
    """Rule 4's floor: medians closer than this to the best's differ by noise (in the objective's own figure)."""
    return max(objective.floor_rel * abs(best_median), objective.floor_abs)


def shortfall(median: float, best_median: float, objective: Objective) -> float | None:
    """How much worse than the best median `median` is, in the unit its floor is stated in: % of the best for a
    relative floor (tokens/s), else percentage points (stall); 0 = as good, negative = better. None: a relative
    shortfall against a best of 0."""
    gap = objective.sign * (best_median - median)
    if objective.floor_rel:
        return round(100 * gap / abs(best_median), 6) + 0.0 if best_median else None  # + 0.0: never -0.0
    return round(100 * gap, 6) + 0.0


def floor_shortfall(best_median: float, objective: Objective) -> float | None:
    """The noise floor as a shortfall (stall: 1 point; tokens/s: 2 % of the best): differences below it are noise."""
    return shortfall(best_median - objective.sign * noise_floor(best_median, objective), best_median, objective)


def within_noise(entry: dict, best: dict, objective: Objective) -> bool:
    """Rule 4: ranges over the repeats overlap, or the medians differ by less than the floor."""
    best_worst = min(objective.sign * v for v in best["values"])
    entry_best = max(objective.sign * v for v in entry["values"])
    floor = noise_floor(best["median"], objective)
    return entry_best >= best_worst or _score(best, objective) - _score(entry, objective) < floor


def recommend(ranked: list[dict], objective: Objective, p95_target_ms: float, swept_threads: bool,
              step_ms: float = 0.0) -> dict | None:
    """Apply the rule to `rank_settings` output (marks `tied_with_best` in place); None when nothing ran ok.
    `step_ms`: the simulated training step the stall objective was measured against (named in the reason)."""
    measured = [e for e in ranked if e["status"] == "ok"]
    feasible = [e for e in measured if e["feasible"]]
    pool = feasible or measured
    if not pool:
        return None
    best = max(pool, key=lambda e: (_score(e, objective), [-k for k in memory_key(e["setting"])]))
    tied = [e for e in pool if within_noise(e, best, objective)]
    for entry in tied:
        entry["tied_with_best"] = True
    winner = min(tied, key=headroom_key)
    others = [e for e in pool if e not in tied]
    runner_up = max(others, key=lambda e: _score(e, objective)) if others else None
    setting = winner["setting"]
    env = {SETTING_ENV[key]: str(value) for key, value in setting.items()
           if key != "tokenizer_threads" or swept_threads}
    spreads = [e["spread"] for e in pool if e["ok"] >= 2]
    typical_spread = round(float(statistics.median(spreads)), 6) if spreads else None
    typical = ("—" if typical_spread is None else f"{100 * typical_spread:.1f} points" if objective.sign < 0
               else f"{100 * typical_spread / abs(best['median']):.0f} % of the best" if best["median"] else "—")
    if winner["ok"] < 2:
        confidence = "low"
        why = (f"only {winner['ok']} successful repeat(s) of the pick: the noise cannot be estimated; "
               "run again with more --repeats or a larger --budget-s")
    elif len(tied) > 1:
        confidence = "indistinguishable"
        keeps_up = objective.metric == "stall_fraction" and all(
            e["max"] < objective.floor_abs for e in pool)
        if len(tied) == len(pool) and keeps_up:
            why = (f"every setting keeps up with a {step_ms:g} ms step (stall under "
                   f"{100 * objective.floor_abs:g} % in every trial): the loader is not the bottleneck at this step "
                   "time, so these settings cannot be told apart by stall and any serves; give your "
                   "training step's time (--step-ms), or rank the loader's raw speed with --objective tokens_per_s; ")
        else:
            why = "" if len(tied) < len(pool) else (
                f"no setting could be told apart from the best: the typical spread over repeats (±{typical}) is as "
                "large as the differences — a busy node, or trials too short (--trial-s) or too few (--repeats); ")
        why += (f"{len(tied)} settings are statistically indistinguishable from the best "
               f"({setting_label(best['setting'])}, median {format_value(best['median'], objective)}): "
               "any of them serves; " + _headroom_why(winner, best))
    else:
        confidence = "clear"
        why = f"the best median ({format_value(best['median'], objective)}), beyond the noise of every other setting"
    if runner_up is not None:
        gap = shortfall(runner_up["median"], best["median"], objective) or 0.0
        why += (f"; the next distinguishable setting ({setting_label(runner_up['setting'])}) is "
                + (f"{gap:.1f} % lower" if objective.floor_rel else f"{gap:.1f} points worse"))
    unmeasured = sum(1 for e in ranked if e["status"] == "unmeasured")
    if unmeasured:
        why += f"; {unmeasured} of {len(ranked)} settings were not measured at all (partial sweep)"
    if not feasible:
        why += f"; NO setting met fetch p95 < {p95_target_ms:g} ms — this pick misses the target"
    return {
        "setting": setting, "label": setting_label(setting), "env": env,
        "export": "export " + " ".join(f"{k}={v}" for k, v in env.items()),
        "median": winner["median"], "spread": winner["spread"], "fetch_p95_ms": winner["fetch_p95_ms"],
        "best": best["setting"], "best_median": best["median"],
        "indistinguishable": [e["setting"] for e in tied],
        "runner_up": None if runner_up is None else {"setting": runner_up["setting"], "median": runner_up["median"]},
        "typical_spread": typical_spread, "confidence": confidence, "reason": why, "meets_p95_target": bool(feasible), "rule": RULE,
    }


def _headroom_why(winner: dict, best: dict) -> str:
    """Why the tie went to `winner`: the most headroom against spikes (its worst stall and worst p99 over the
    repeats), not the least memory."""
    figures = [f"worst stall {100 * winner['worst_stall']:.1f} %" if winner.get("worst_stall") is not None else None,
               f"worst fetch p99 {winner['worst_p99_ms']:.1f} ms" if winner.get("worst_p99_ms") is not None else None]
    shown = ", ".join(f for f in figures if f) or "no spike measured"
    lead = "the best is also the one" if winner is best else "picked the one"
    return (f"{lead} with the most headroom against spikes ({shown} over its repeats): a slow read tips over the "
            "setting whose worst moment came closest to the step, while a deeper queue costs only its batches' "
            "int32 ids (32 KB at batch 8 x 1024), so memory breaks only exact ties")

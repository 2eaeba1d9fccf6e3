"""Artifacts -> the data behind `fwe report`'s pictures of them: the measure runs' first-batch phase waterfall, the
tune heat map(s) with the recommendation, and a regression record's deltas against the bound.

Pure functions of the artifact dicts as fwe writes them (no files, no drawing; `fwe_cli.report.draw` draws these)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class WaterfallRow:
    """One run's first batch, phase after phase: (phase, start s, duration s) from the process's spawn."""

    label: str
    segments: tuple[tuple[str, float, float], ...]
    total_s: float


@dataclass(frozen=True)
class Waterfall:
    phases: tuple[str, ...]
    rows: tuple[WaterfallRow, ...]


@dataclass(frozen=True)
class Heatmap:
    """A tune sweep's doc batch x Q grid at one tokenizer-thread count (None: not swept)."""

    threads: int | None
    doc_batches: tuple[int, ...]
    """Rows."""
    queue_depths: tuple[int, ...]
    """Columns."""
    values: tuple[tuple[float | None, ...], ...]
    """Median of the objective per cell (None: failed or not measured)."""
    status: tuple[tuple[str, ...], ...]
    """ok | failed | unmeasured per cell."""
    feasible: tuple[tuple[bool, ...], ...]
    tied: tuple[tuple[bool, ...], ...]
    marked: tuple[int, int] | None
    """(row, column) of the recommended setting, when it is on this grid."""
    objective: str
    """The objective's name (fwe_cli.measure.tune_rank.OBJECTIVES)."""
    metric: str
    label: str
    direction: str
    """max | min: which way is better."""
    noise: tuple[tuple[bool, ...], ...]
    """Within noise of the best setting's median, by the rule `fwe tune` ranks by (tune_rank.within_noise)."""
    shortfall: tuple[tuple[float | None, ...], ...]
    """How much worse than the best per cell, in `unit` (tune_rank.shortfall; None: failed or not measured)."""
    unit: str
    """What `shortfall`, `floor` and `reach` count: 'points' (of stall) or '%' (of the best tokens/s)."""
    floor: float | None
    """The noise floor in `unit`: a cell beyond noise falls short by at least this much."""
    reach: float | None
    """The shortfall at the far end of the colour scale, the same for every map of the sweep: the largest measured,
    but at least REACH_FLOORS floors (None: nothing measured)."""


REACH_FLOORS = 10
"""The colour scale of a tune heat map reaches at least this many noise floors (stall: 10 points; tokens/s: 20 % of
the best): a spread of a few floors never spans the whole palette."""


@dataclass(frozen=True)
class DeltaBar:
    metric: str
    worse_pct: float | None
    """How much worse than the baseline, % (negative: better); None: the baseline was 0."""
    bound_pct: float
    passed: bool
    note: str
    baseline: float
    current: float


@dataclass(frozen=True)
class Deltas:
    baseline: str | None
    bars: tuple[DeltaBar, ...]
    passed: bool
    notes: tuple[str, ...]


def run_label(run: dict, index: int) -> str:
    """A measure run's name: its folder (run01-warm), else its index and kind."""
    run_dir = run.get("run_dir")
    return os.path.basename(run_dir) if isinstance(run_dir, str) and run_dir else f"run{index:02d}-{run.get('kind')}"


def phase_waterfall(summary: dict) -> Waterfall | None:
    """Each measure run's first-batch phases laid end to end (they add up to first_batch_s); runs without phases
    (failed before its first batch) are left out; None when no run has any."""
    from fwe_cli.measure.child import PHASES

    rows = []
    for index, run in enumerate(summary.get("runs") or []):
        phases = run.get("phases") if isinstance(run, dict) else None
        if not isinstance(phases, dict) or not phases:
            continue
        order = [p for p in PHASES if p in phases] + [p for p in phases if p not in PHASES]
        start, segments = 0.0, []
        for phase in order:
            duration = float(phases[phase] or 0.0)
            segments.append((phase, round(start, 6), duration))
            start += duration
        rows.append(WaterfallRow(run_label(run, index), tuple(segments), round(start, 6)))
    if not rows:
        return None
    return Waterfall(tuple(dict.fromkeys(phase for row in rows for phase, _, _ in row.segments)), tuple(rows))


def _against_best(summary: dict) -> tuple[dict, str, float | None, float | None]:
    """Each measured setting (by its label) -> (within noise of the best?, shortfall); the unit; the noise floor and
    the colour scale's reach in it. Noise is what `fwe tune` calls noise (tune_rank), never a second rule."""
    from fwe_cli.measure.tune_rank import OBJECTIVES, floor_shortfall, setting_label, shortfall, within_noise

    objective = OBJECTIVES[summary["objective"]["name"]]
    unit = "%" if objective.floor_rel else "points"
    best_setting = (summary.get("recommendation") or {}).get("best")
    best = next((e for e in summary["settings"] if e["setting"] == best_setting and e.get("status") == "ok"), None)
    if best is None:
        return {}, unit, None, None
    against = {setting_label(e["setting"]): (within_noise(e, best, objective),
                                             shortfall(e["median"], best["median"], objective))
               for e in summary["settings"] if e.get("status") == "ok"}
    floor = floor_shortfall(best["median"], objective)
    beyond = [gap for noise, gap in against.values() if not noise and gap is not None]
    return against, unit, floor, max([REACH_FLOORS * (floor or 0.0)] + beyond) or None


def tune_heatmaps(summary: dict) -> list[Heatmap]:
    """One doc batch x Q matrix of the objective's median per tokenizer-thread count swept (one when not swept),
    with the recommended cell marked and each measured cell's standing against the best (within noise, or how far
    short), on one colour scale for every map."""
    from fwe_cli.measure.tune_rank import setting_label

    plan, objective = summary["plan"], summary["objective"]
    rec = summary.get("recommendation") or {}
    against, unit, floor, reach = _against_best(summary)
    maps = []
    for threads in plan.get("threads") or [None]:
        cells = {}
        for entry in summary["settings"]:
            setting = entry["setting"]
            if setting.get("tokenizer_threads") == threads:
                cells[(setting["doc_batch"], setting["queue_depth"])] = entry
        rows, cols = tuple(plan["doc_batches"]), tuple(plan["queue_depths"])

        def grid(value):
            return tuple(tuple(value(cells.get((d, q)) or {}) for q in cols) for d in rows)

        marked = None
        setting = rec.get("setting")
        if setting and setting.get("tokenizer_threads") == threads \
                and setting["doc_batch"] in rows and setting["queue_depth"] in cols:
            marked = (rows.index(setting["doc_batch"]), cols.index(setting["queue_depth"]))
        maps.append(Heatmap(
            threads=threads, doc_batches=rows, queue_depths=cols,
            values=grid(lambda e: e.get("median") if e.get("status") == "ok" else None),
            status=grid(lambda e: e.get("status") or "unmeasured"),
            feasible=grid(lambda e: bool(e.get("feasible"))),
            tied=grid(lambda e: bool(e.get("tied_with_best"))),
            marked=marked, objective=objective["name"], metric=objective["metric"], label=objective["label"],
            direction=objective["direction"],
            noise=grid(lambda e: e.get("status") == "ok" and against.get(setting_label(e["setting"]), (False,))[0]),
            shortfall=grid(lambda e: against.get(setting_label(e["setting"]), (None, None))[1] if e else None),
            unit=unit, floor=floor, reach=reach))
    return maps


def cell_shade(heatmap: Heatmap, row: int, col: int) -> float | None:
    """Where a cell sits on the colour scale: 0.0 for every cell within noise of the best (one colour, however their
    medians scatter), else its shortfall over the scale's reach (from floor / reach up to 1.0, the far end); None for
    a cell with nothing to colour (failed, not measured)."""
    gap = heatmap.shortfall[row][col]
    if gap is None or not heatmap.reach:
        return None
    if heatmap.noise[row][col]:
        return 0.0
    return min(1.0, max(0.0, gap) / heatmap.reach)


def regression_deltas(record: dict | None) -> Deltas | None:
    """A regression record's checks as 'worse by %' bars (each metric's own direction: a drop in tokens/s is worse)
    against its bound; None when the artifact was not gated (no record)."""
    from fwe_cli.measure.regression import METRICS

    if not isinstance(record, dict):
        return None
    bars = []
    for check in record.get("checks") or []:
        worse_is = check.get("worse_is") or METRICS.get(check["metric"], ("higher",))[0]
        delta = check.get("delta_pct")
        bars.append(DeltaBar(check["metric"], None if delta is None else (delta if worse_is == "higher" else -delta),
                             float(check["bound_pct"]), bool(check["pass"]), check.get("note") or "",
                             check["baseline"], check["current"]))
    return Deltas(record.get("baseline"), tuple(bars), bool(record.get("pass")), tuple(record.get("notes") or ()))


def cell_text(heatmap: Heatmap, row: int, col: int) -> str:
    """What a heat-map cell says: the median (as `fwe tune` writes it), failed, or — (not measured), with ≈ for
    within noise of the best and !p95 for fetch p95 over target."""
    from fwe_cli.measure.tune_rank import OBJECTIVES, format_value

    status = heatmap.status[row][col]
    if status != "ok":
        return "failed" if status == "failed" else "—"
    text = format_value(heatmap.values[row][col], OBJECTIVES[heatmap.objective], units=False)
    if heatmap.tied[row][col] and heatmap.marked != (row, col):
        text = "≈ " + text
    return text + ("" if heatmap.feasible[row][col] else "\n!p95")


def format_metric(metric: str, value: float | None) -> str:
    """A regression metric's value in its unit (regression.METRICS): 24.0 ms, 1.31 s, 127,333 tokens/s."""
    from fwe_cli.measure.regression import METRICS

    if value is None:
        return "—"
    unit = METRICS.get(metric, ("", None, ""))[2]
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "ms":
        return f"{value:.2f} ms"
    if unit == "tokens/s":
        return f"{value:,.0f} tokens/s"
    return f"{value:g}"

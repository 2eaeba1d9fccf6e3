"""Heartbeat lines -> the series `fwe report` draws: the fetch-wait timeline (with the training step, the warmup
boundary, queue fill and head/tail parts) and the split of those waits by what the producer was doing.

Pure functions of the lines (`fwe_cli.report.inputs` reads them; `fwe_cli.report.draw` draws these). The optional
fields of `fineweb_fetch` lines (`queue_fill`, `wait_s_by_stage`: fwe_cli.loader.flow.stages; `part`) are used when
present, and a series from lines without them (an older fwe's) simply has none (None)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from fwe_cli.loader.flow.stages import STAGES

# The producer's stages in pipeline order: known ones are shown in this order, any other after them by name.
KNOWN_STAGES = STAGES
STAGE_BINS = 60  # per-step stage bars: more steps than this are summed into this many bins of consecutive steps


@dataclass(frozen=True)
class Warmup:
    """The `fineweb_loader_warmup` line: batches queued before step 1."""

    requested: int
    filled: int
    wait_ms: float

    @property
    def boundary(self) -> float:
        """Where the warmup ends on the step axis: steps 1..filled took batches queued before training started."""
        return self.filled + 0.5


@dataclass(frozen=True)
class Timeline:
    """One process's fetch waits, step by step (one measure run, or one rank of a training job)."""

    label: str
    steps: tuple[int, ...]
    wait_ms: tuple[float, ...]
    """Time the training loop was blocked in next() at each step, ms."""
    queue_fill: tuple[float | None, ...] | None
    """Batches queued when the step asked (None: the lines do not carry it)."""
    parts: tuple[str | None, ...] | None
    """head/tail of a long run whose middle was not logged (None: the lines do not say)."""
    warmup: Warmup | None
    step_ms: float | None
    """The training step the waits are set against (None: not known, or the loader ran alone)."""
    step_source: str | None
    """plan (the measured run's simulated step) | timestamps (estimated from the gaps between heartbeat lines)"""
    stall_fraction: float | None
    """Time blocked in next() over the wall time the steps after the first batch took (None under two)."""
    first_batch_s: float | None
    errors: tuple[str, ...]

    @property
    def steady_wait_ms(self) -> tuple[float, ...]:
        """The waits after the first batch (step 1 waits for the start-up, reported as first_batch_s)."""
        return tuple(wait for step, wait in zip(self.steps, self.wait_ms) if step > 1)


@dataclass(frozen=True)
class StageSplit:
    """The waits of one series split by producer stage, per bin of consecutive steps."""

    label: str
    stages: tuple[str, ...]
    bins: tuple[tuple[int, int], ...]
    """(first step, last step) of each bin."""
    seconds: tuple[tuple[float, ...], ...]
    """seconds[stage index][bin index]"""

    @property
    def totals(self) -> dict[str, float]:
        return {stage: sum(row) for stage, row in zip(self.stages, self.seconds)}


@dataclass(frozen=True)
class StageTotals:
    """Waits by stage summed per series (a measure run, a rank): one bar each."""

    labels: tuple[str, ...]
    stages: tuple[str, ...]
    seconds: tuple[tuple[float, ...], ...]
    """seconds[series index][stage index]"""


def order_stages(names) -> tuple[str, ...]:
    """Known stages in pipeline order, then the others by name."""
    names = set(names)
    return tuple(s for s in KNOWN_STAGES if s in names) + tuple(sorted(names - set(KNOWN_STAGES)))


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def fetch_lines(lines) -> list[dict]:
    """The `fineweb_fetch` lines that carry a step and a wait, in order."""
    return [line for line in lines if line.get("msg") == "fineweb_fetch" and isinstance(line.get("step"), int)
            and _number(line.get("dt_fetch_s")) is not None]


def group_by_process(lines) -> list[tuple[str, list[dict]]]:
    """A training job's lines by (rank, pid), in order of appearance: a restarted job appends to the same file and
    counts its steps from 1 again. Labelled "rank R", or "rank R pid P" when a rank had several processes."""
    groups: dict[tuple, list[dict]] = {}
    for line in lines:
        groups.setdefault((line.get("rank"), line.get("pid")), []).append(line)
    pids: dict = {}
    for rank, pid in groups:
        pids.setdefault(rank, []).append(pid)
    return [(f"rank {rank}" + (f" pid {pid}" if len(pids[rank]) > 1 else ""), group)
            for (rank, pid), group in groups.items()]


def _segments(fetches: list[dict]) -> list[list[dict]]:
    """Runs of consecutive steps within one part: the gaps between them are not time the loader was measured."""
    runs: list[list[dict]] = []
    for line in fetches:
        if runs and line["step"] == runs[-1][-1]["step"] + 1 and line.get("part") == runs[-1][-1].get("part"):
            runs[-1].append(line)
        else:
            runs.append([line])
    return runs


def estimated_step_ms(fetches: list[dict]) -> float | None:
    """The training step between fetches, from the heartbeat timestamps: each line is written when its fetch
    returns, so the gap to the next line is one step of compute plus the next fetch's wait. Median over
    consecutive steps, ms (None without two consecutive steps that carry `ts`)."""
    computes = []
    for run in _segments(fetches):
        for before, after in zip(run, run[1:]):
            t0, t1 = _number(before.get("ts")), _number(after.get("ts"))
            if t0 is not None and t1 is not None:
                computes.append(max(0.0, t1 - t0 - after["dt_fetch_s"]) * 1000.0)
    return round(statistics.median(computes), 3) if computes else None


def stall_fraction(fetches: list[dict]) -> float | None:
    """Time blocked in next() over the wall time of the logged steps (each run of consecutive steps spans from the
    start of its first fetch to the end of its last), as `fwe measure` defines it."""
    blocked = wall = 0.0
    for run in _segments(fetches):
        t0, t1 = _number(run[0].get("ts")), _number(run[-1].get("ts"))
        if len(run) < 2 or t0 is None or t1 is None:
            continue
        blocked += sum(line["dt_fetch_s"] for line in run)
        wall += t1 - t0 + run[0]["dt_fetch_s"]
    return round(blocked / wall, 6) if wall > 0 else None


def _warmup(lines) -> Warmup | None:
    found = [line for line in lines if line.get("msg") == "fineweb_loader_warmup"]
    if not found:
        return None
    line = found[-1]
    return Warmup(int(_number(line.get("requested")) or 0), int(_number(line.get("filled")) or 0),
                  _number(line.get("wait_ms")) or 0.0)


def timeline(lines, label: str, plan_step_ms: float | None = None) -> Timeline:
    """The fetch-wait timeline of one process's heartbeat lines. `plan_step_ms`: the simulated step of a measured
    run (0: the loader ran alone, no step); None: a training job's, estimated from the timestamps."""
    fetches = fetch_lines(lines)
    if plan_step_ms is None:
        step_ms, source = estimated_step_ms(fetches), "timestamps"
    else:
        step_ms, source = (plan_step_ms or None), "plan"
    ready = [line for line in lines if line.get("msg") == "fineweb_loader_ready"]
    return Timeline(
        label=label,
        steps=tuple(line["step"] for line in fetches),
        wait_ms=tuple(round(line["dt_fetch_s"] * 1000.0, 6) for line in fetches),
        queue_fill=(tuple(_number(line.get("queue_fill")) for line in fetches)
                    if any("queue_fill" in line for line in fetches) else None),
        parts=(tuple(line.get("part") for line in fetches) if any("part" in line for line in fetches) else None),
        warmup=_warmup(lines),
        step_ms=step_ms,
        step_source=source if step_ms else None,
        stall_fraction=stall_fraction([line for line in fetches if line["step"] > 1]),
        first_batch_s=_number(ready[0].get("dt")) if ready else None,
        errors=tuple(str(line.get("error") or "") for line in lines if line.get("msg") == "fineweb_loader_error"),
    )


def _stage_waits(line: dict) -> dict[str, float]:
    waits = line.get("wait_s_by_stage")
    if not isinstance(waits, dict):
        return {}
    return {str(stage): value for stage, raw in waits.items() if (value := _number(raw)) is not None}


def stage_split(lines, label: str, bins: int = STAGE_BINS) -> StageSplit | None:
    """Each step's wait by producer stage (`wait_s_by_stage`), summed over bins of consecutive steps when there are
    more steps than `bins`; None when no line carries the split."""
    fetches = [line for line in fetch_lines(lines) if _stage_waits(line)]
    if not fetches:
        return None
    stages = order_stages(stage for line in fetches for stage in _stage_waits(line))
    width = max(1, math.ceil(len(fetches) / bins))
    # bins never straddle a gap (head | tail, steps not logged): each run of consecutive steps is binned alone
    groups = [run[i:i + width] for run in _segments(fetches) for i in range(0, len(run), width)]
    seconds = tuple(tuple(round(sum(_stage_waits(line).get(stage, 0.0) for line in group), 9) for group in groups)
                    for stage in stages)
    return StageSplit(label, stages, tuple((group[0]["step"], group[-1]["step"]) for group in groups), seconds)


def stage_totals(named: list[tuple[str, dict[str, float]]]) -> StageTotals | None:
    """One bar per series from {stage: seconds} (a run's `stall_by_stage_s`, or a StageSplit's totals); None when
    no series has any."""
    named = [(label, {str(k): v for k, raw in split.items() if (v := _number(raw)) is not None})
             for label, split in named if isinstance(split, dict)]
    named = [(label, split) for label, split in named if split]
    if not named:
        return None
    stages = order_stages(stage for _, split in named for stage in split)
    return StageTotals(tuple(label for label, _ in named), stages,
                       tuple(tuple(split.get(stage, 0.0) for stage in stages) for _, split in named))

"""The warmup a measured run needed: the smallest NSA_FWE_WARMUP_BATCHES that would have removed every stalled step
of that run, with an NSA_FWE_WARMUP_TIMEOUT over the time it takes to fill, and the NSA_FWE_Q that can hold it.

Pure functions of the producer's timeline (`ThreadPrefetcher.produced`: when each batch was queued, and how long
its put waited for room) and the training step, so the rule is tested on made-up timelines.

The model. Batch k took `work_k` of the producer's own time: from the previous batch's hand-off to its own, less
the time its put waited for room (a full queue, which a deeper one would not have had). With warmup W and queue
depth Q, the producer hands batch k over at put_k = put_{k-1} + work_k, but never before batch k - Q was taken (the
queue is full until then); training starts once W batches are queued; step 1 takes batch 1, and each later step asks
one training step after the previous one took its batch and waits until that batch is there. A step that waits
longer than STALL_S is a stalled step. The first W for which no step after the first stalls is the advice; Q is
raised to W when smaller (a warmup cannot wait for more batches than the queue holds).

Caveat: while the producer waits for room, the source's own read-ahead may keep fetching, so the measured work
after such a wait can be shorter than it would be unthrottled; re-measuring with the advice applied (what `fwe tune`
does) shows whether it holds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

STALL_S = 0.001
"""A step that waits longer than this for its batch is stalled (a queued batch is handed over in microseconds)."""
TIMEOUT_FACTOR = 2.0
TIMEOUT_MIN_MARGIN_S = 1.0
"""The advised timeout: TIMEOUT_FACTOR x the fill time, at least TIMEOUT_MIN_MARGIN_S more, whole seconds up: a
slower start (a busier node, a colder cache) still fills, and a timeout that passes only starts training early."""


@dataclass(frozen=True)
class WarmupAdvice:
    batches: int
    """NSA_FWE_WARMUP_BATCHES: 0 when no warmup is needed or none helps."""
    timeout_s: float | None
    """NSA_FWE_WARMUP_TIMEOUT (None without warmup)."""
    queue_depth: int
    """NSA_FWE_Q that holds the warmup: the run's, or `batches` when larger."""
    fill_s: float | None
    """Seconds from the loader's start until `batches` batches are queued, in the model (None without warmup)."""
    stalled_steps: int
    """Steps after the first that stall without warmup, in the model (measured stalls are the run's own record)."""
    steps: int
    """Steps of the run the advice covers (the first included)."""
    helps: bool
    """False when no warmup within the batches measured removes every stall: the producer falls behind the step on
    average, and a warmup only delays the stalls."""
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def work_times(produced: Sequence[tuple[float, float]], start: float) -> list[float]:
    """Each batch's own production time from the producer's timeline: (time queued, seconds its put waited) per
    batch, times on the clock of `start` (the loader's creation)."""
    work, previous = [], start
    for queued, put_wait in produced:
        work.append(max(0.0, queued - previous - put_wait))
        previous = queued
    return work


def simulate(work: Sequence[float], step_s: float, steps: int, warmup: int,
             queue_depth: int) -> tuple[list[float], float]:
    """(each step's wait, from step 2 on; the moment training starts) for `steps` steps with that warmup and queue
    depth, in the model of the module docstring. `work` must cover max(steps, warmup) batches."""
    put: list[float] = []
    take: list[float] = []

    def hand_over(k: int) -> None:  # batch k (0-based) is queued once made and once batch k - Q has been taken
        made = (put[-1] if put else 0.0) + work[k]
        put.append(max(made, take[k - queue_depth]) if k >= queue_depth else made)

    for k in range(warmup):
        hand_over(k)
    start = put[warmup - 1] if warmup else 0.0
    waits = []
    for k in range(steps):
        if k >= len(put):
            hand_over(k)
        if k == 0:
            take.append(max(start, put[0]))
            continue
        asks = take[-1] + step_s
        take.append(max(asks, put[k]))
        waits.append(take[-1] - asks)
    return waits, start


def _stalls(waits: Sequence[float]) -> int:
    return sum(1 for wait in waits if wait > STALL_S)


def advise_warmup(work: Sequence[float], step_s: float, steps: int, queue_depth: int) -> WarmupAdvice:
    """The smallest warmup removing every stalled step of a run of `steps` steps at `step_s` whose batches took
    `work` (`work_times`) to make, and the queue depth and timeout it needs."""
    steps = min(steps, len(work))
    if step_s <= 0 or steps < 2:
        return WarmupAdvice(0, None, queue_depth, None, 0, steps, False,
                            "no training step to keep up with (--step-ms 0)" if step_s <= 0
                            else "too few steps measured to see a stall")
    before = _stalls(simulate(work, step_s, steps, 0, queue_depth)[0])
    if not before:
        return WarmupAdvice(0, None, queue_depth, None, 0, steps, True,
                            f"no step after the first stalled at a {step_s * 1000:g} ms step")
    steady = sum(work[1:steps]) / (steps - 1)
    if steady >= step_s:  # then the warmup that covers this run grows with the run: none covers a longer one
        return WarmupAdvice(0, None, queue_depth, None, before, steps, False,
                            f"{before} of {steps - 1} steps after the first stalled at a {step_s * 1000:g} ms step, "
                            f"and a batch took {steady * 1000:.1f} ms to make on average: the loader falls behind "
                            "the step, so a warmup would only delay the stalls; make it faster (fwe tune)")
    for warmup in range(1, len(work) + 1):
        depth = max(queue_depth, warmup)
        waits, start = simulate(work, step_s, steps, warmup, depth)
        if not _stalls(waits):
            timeout = math.ceil(max(TIMEOUT_FACTOR * start, start + TIMEOUT_MIN_MARGIN_S))
            raised = f"; Q raised from {queue_depth} to {depth} to hold it" if depth > queue_depth else ""
            return WarmupAdvice(warmup, float(timeout), depth, round(start, 6), before, steps, True,
                                f"without warmup {before} of {steps - 1} steps after the first stall at a "
                                f"{step_s * 1000:g} ms step (this run's producer timeline); {warmup} batches queued "
                                f"before step 1 remove every one (queued {start:.2f} s after the loader starts; "
                                f"timeout {timeout} s){raised}")
    return WarmupAdvice(0, None, queue_depth, None, before, steps, False,
                        f"{before} of {steps - 1} steps after the first stalled at a {step_s * 1000:g} ms step and "
                        f"no warmup within the {len(work)} batches measured removes them")


def combine(advice: Sequence[dict]) -> dict | None:
    """One advice for several runs of one setting (WarmupAdvice dicts): a run no warmup helps decides (its advice);
    otherwise the largest warmup, with the largest queue depth, fill and timeout any run needs. None for no runs."""
    if not advice:
        return None
    failing = [a for a in advice if not a["helps"]]
    if failing:
        return dict(failing[0], runs=len(advice))
    worst = max(advice, key=lambda a: (a["batches"], a["stalled_steps"]))
    timeouts = [a["timeout_s"] for a in advice if a["timeout_s"] is not None]
    fills = [a["fill_s"] for a in advice if a["fill_s"] is not None]
    return dict(worst, queue_depth=max(a["queue_depth"] for a in advice), runs=len(advice),
                timeout_s=max(timeouts) if worst["batches"] else None, fill_s=max(fills) if worst["batches"] else None,
                stalled_steps=max(a["stalled_steps"] for a in advice))


class StalledSteps:
    """A measured run's stalled steps, counted as the steps come (nothing kept per step): the steps after the first
    (numbered from 2, as the heartbeat numbers them) that found the queue empty and waited longer than STALL_S."""

    def __init__(self) -> None:
        self.count = 0
        self.first: int | None = None
        self._step = 1

    def note(self, fill: int | None, wait: float) -> None:
        """The next step found `fill` batches queued and waited `wait` seconds."""
        self._step += 1
        if not fill and wait > STALL_S:
            self.count += 1
            if self.first is None:
                self.first = self._step


def advice_env(advice: dict | None, queue_depth: int) -> dict[str, str]:
    """The variables that apply an advice to a run whose queue depth is `queue_depth`: the warmup's batches and
    timeout, and NSA_FWE_Q when the warmup needs a deeper queue; {} when no warmup is advised."""
    from fwe_cli.measure.tune_rank import SETTING_ENV

    if not advice or not advice["batches"]:
        return {}
    env = {SETTING_ENV["warmup_batches"]: str(advice["batches"]),
           SETTING_ENV["warmup_timeout"]: f"{advice['timeout_s']:g}"}
    if advice["queue_depth"] > queue_depth:
        env[SETTING_ENV["queue_depth"]] = str(advice["queue_depth"])
    return env


def advice_line(advice: dict | None, queue_depth: int, warmup_batches: int = 0) -> str:
    """The advice in one line for people: the variables to set and why, or why none. `queue_depth` and
    `warmup_batches`: the measured runs' own (a warmup they already had is said to be in effect)."""
    if advice is None:
        return "warmup: not computed (no run measured its producer's timeline)"
    env = advice_env(advice, queue_depth)
    if env:
        had = f" (the runs had {warmup_batches})" if warmup_batches else ""
        return "warmup: " + " ".join(f"{k}={v}" for k, v in env.items()) + f"{had} — {advice['reason']}"
    return ("warmup: none needed — " if advice["helps"] else "warmup: would not help — ") + advice["reason"]

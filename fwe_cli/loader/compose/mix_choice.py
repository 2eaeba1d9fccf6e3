"""Which child a mixture takes its next document from: arithmetic on what it took so far, no random generator, so
the same documents come in the same order on any Q, doc batch, threads, backend and after any resume.

- Fixed weights, or a stage of constant weights: the child whose count over its share is lowest (the first of
  equals); each child is at most one of its documents past its share at every point.
- A ramp: the child furthest below what the weights in force asked of it since the reader's stream entered the
  stage (schedule.Timeline.targets, the integral of the weights over the reader's tokens), among those whose weight
  in force is above 0; each is at most one of its documents past what was asked of it.

Under a schedule the counts are those of the stage in force (they start at 0 where the reader's stream enters a
stage) and the clock is the reader's tokens handed on, read as the job's step by its MixClock.
"""

from __future__ import annotations

from fwe_cli.loader.compose.schedule import Timeline


def lowest(counts: list, shares) -> int | None:
    """The child whose count lies furthest below its share (the first of equals); None when no share is set."""
    best, best_key = None, None
    for i, share in enumerate(shares):
        if share > 0:
            key = counts[i] / share
            if best_key is None or key < best_key:
                best, best_key = i, key
    return best


class Chooser:
    """The choice of each next child for one stream (see the module docstring): `next()` names it, `took(child,
    count, tokens)` counts what it gave (`count` in what the shares are of; `tokens` on the clock)."""

    def __init__(self, shares: tuple, counts: list, timeline: Timeline | None = None, stage: int = -1,
                 clock: int = 0):
        self.shares = shares
        self.counts = list(counts)
        self.timeline = timeline
        self.stage = stage
        """The stage the counts are of (-1: none yet)."""
        self.clock = clock
        self.weights = shares
        """The shares in force at the last choice."""
        self.chosen_at: int | None = None
        """The job step of the last choice (under a schedule)."""

    @property
    def step(self) -> int | None:
        """The job step the next document is delivered in (None: no schedule)."""
        return None if self.timeline is None else self.timeline.clock.step_of(self.clock)

    def next(self) -> int | None:
        t = self.timeline
        if t is None:
            return lowest(self.counts, self.shares)
        step = self.chosen_at = t.clock.step_of(self.clock)
        k = t.stage_at(step, self.stage)
        if k != self.stage:
            self.stage, self.counts = k, [0] * len(self.counts)
        if not t.ramps[k]:
            self.weights = t.shares[k]
            return lowest(self.counts, self.weights)
        self.weights = t.weights(k, step)
        targets = t.targets(k, self.clock - sum(self.counts), self.clock)
        best, best_key = None, None
        for i, (weight, target, count) in enumerate(zip(self.weights, targets, self.counts)):
            if weight > 0 and (best_key is None or target - count > best_key):
                best, best_key = i, target - count
        return best

    def took(self, child: int, count: int, tokens: int) -> None:
        self.counts[child] += count
        self.clock += tokens

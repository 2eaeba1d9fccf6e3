"""Where a mixture's stream stands: its cursor (each child's last document and what the shares count), what a changed
world dealt a reader of it (its plan) and where an old reader stood (its frontier), and, for a mix with a schedule,
the clock its weights are read by (`MixClock`: a reader's tokens as the job's steps).

A mix without a schedule keeps the positions it always had (`MixtureCursor`, `MixturePlan`), so its states resume as
before; a scheduled one's carry the clock too (`ScheduledCursor`, `ScheduledPlan`): the cursor plus the step is the
whole state of a schedule, since its weights are a pure function of the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwe_cli.errors import ConfigError
from fwe_cli.loader.sources.position import Position


@dataclass(frozen=True, slots=True)
class MixClock(Position, name="mix_clock"):
    """How one reader's tokens map to the job's steps: its world began at job step `step`, the job having delivered
    `tokens` tokens before it; each of its `ranks` ranks has `workers` readers (DataLoader or Grain workers; 1: the
    rank reads itself), this reader is worker `worker` of its rank, and a batch takes `batch` tokens of its stream.
    A rank's workers hand out their batches in turn, so the reader's batch i is its rank's batch i x workers +
    worker, and every rank steps together: step s of the job is batch s of every rank."""

    step: int
    tokens: int
    ranks: int
    workers: int
    worker: int
    batch: int

    @classmethod
    def begun(cls, readers, workers: int, batch: int, plan) -> "MixClock":
        """The clock of reader `readers` (a Shard: rank x `workers` + worker) whose batches take `batch` tokens, begun
        where a changed world's `plan` (a ScheduledPlan) began it, else at the job's start."""
        if not batch:
            raise ConfigError("a mix's \"schedule\" counts the loader's steps: read it through a loader")
        step, tokens = (plan.step, plan.tokens) if isinstance(plan, ScheduledPlan) else (0, 0)
        return cls(step, tokens, max(readers.mod // workers, 1), workers, readers.rem % workers, batch)

    def step_of(self, clock: int) -> int:
        """The job step the reader's token `clock` (counted from its world's beginning) is delivered in."""
        return self.step + (clock // self.batch) * self.workers + self.worker

    def tokens_at(self, step: int) -> int:
        """The job's tokens delivered before step `step` (every rank's)."""
        return self.tokens + (step - self.step) * self.batch * self.ranks

    def step_reaching(self, tokens: int) -> int:
        """The first step before which the job has delivered at least `tokens` tokens."""
        return self.step + max(0, -((self.tokens - tokens) // (self.batch * self.ranks)))

    def reached(self, consumed: int) -> int:
        """The job step after this reader's last batch, once it delivered `consumed` tokens of its stream."""
        return self.step if consumed <= 0 else self.step_of(consumed - 1) + 1


@dataclass(frozen=True, slots=True)
class MixtureCursor(Position, name="mixture", version=2):
    """Where a mixture's stream stands before one of its documents: for each child, the resume of the last document
    taken from it (None before its first) and its share so far (tokens or documents); the child the document comes
    from and its resume there."""

    cursors: tuple
    counts: tuple
    child: int
    at: Position


@dataclass(frozen=True, slots=True)
class ScheduledCursor(MixtureCursor, name="scheduled_mixture"):
    """A scheduled mixture's cursor: `counts` are those of stage `stage` (the one in force at this document's step,
    counted from where the reader's stream entered it), `clock` the reader's tokens handed on before this document
    since its world began, `origin` how they map to the job's steps."""

    stage: int
    clock: int
    origin: MixClock

    @property
    def step(self) -> int:
        """The job step this document's first token is delivered in (the step whose weights chose it)."""
        return self.origin.step_of(self.clock)


@dataclass(frozen=True, slots=True)
class MixturePlan(Position, name="mixture_plan"):
    """What a changed world dealt this reader of each child (None: its fresh share)."""

    children: tuple


@dataclass(frozen=True, slots=True)
class ScheduledPlan(Position, name="scheduled_mixture_plan"):
    """A scheduled mixture's plan: each child's, and the job step the new world begins at with the job's tokens
    before it (its readers' clocks start there)."""

    children: tuple
    step: int
    tokens: int


@dataclass(frozen=True, slots=True)
class MixtureFrontier(Position, name="mixture_frontier"):
    """Where this reader stood in each child (None: it took nothing from it); for a scheduled mixture, the job step
    after its last batch and the job's tokens before that step."""

    children: tuple
    step: int | None = None
    tokens: int | None = None

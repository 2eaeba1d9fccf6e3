"""A mixture's schedule: weights that change as training goes, stage after stage, a pure function of the step.

    "schedule": [{"until_step": 9000, "weights": {"edu": 1, "edu4": 0}},
                 {"until_step": 10000, "weights": {"edu": 0.5, "edu4": 0.5}, "ramp": "linear"}]

A stage ends at a job step (`until_step`) or once the whole job has delivered a number of tokens (`until_tokens`),
every stage of a schedule by the same; it holds its weights (normalized to shares) from the stage before's end, or,
with `ramp` linear, goes to them from the stage before's, linearly in the step. After the last stage its weights hold
until the data ends. `Timeline` lays a schedule on one reader's clock (mix_positions.MixClock: its tokens as the
job's steps): the stage and weights in force at a step, and each source's target over a stretch of the reader's
tokens inside a ramp, in closed form; `first_out_of_data` says where a stage ends past what a source that ends the mix
holds. What of a schedule may change in a running job: compose.schedule_past.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from fwe_cli.errors import ConfigError
from fwe_cli.loader.compose.mix_positions import MixClock

RAMPS = ("linear",)
UNTILS = ("until_step", "until_tokens")


def shares_of(weights) -> tuple[float, ...]:
    """Weights normalized to shares (summing to 1): the one way every mixture turns its weights into shares."""
    total = sum(weights)
    return tuple(w / total for w in weights)


def check_weight(weight: object, what: str) -> None:
    """ConfigError naming `what` unless `weight` is a finite number >= 0."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
        raise ConfigError(f"{what} must be a number >= 0, got {weight!r}")


@dataclass(frozen=True)
class Stage:
    """One stage of a schedule: each source's weight (in the mixture's order), where it ends (one of `until_step`,
    `until_tokens`; neither: the last stage, to the end of the data) and whether it ramps from the stage before."""

    weights: tuple
    until_step: int | None = None
    until_tokens: int | None = None
    ramp: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", tuple(self.weights))

    @property
    def unit(self) -> str | None:
        """The key it ends by (until_step or until_tokens), None for none."""
        return "until_step" if self.until_step is not None else "until_tokens" if self.until_tokens is not None \
            else None

    @property
    def until(self) -> int | None:
        return self.until_step if self.until_step is not None else self.until_tokens

    @classmethod
    def of(cls, value: object, number: int) -> "Stage":
        """A stage from its JSON form (the spec's: weights as a list), ConfigError naming stage #`number`."""
        if isinstance(value, Stage):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"stage #{number} of a schedule must be an object, got {value!r}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ConfigError(f"stage #{number} has unknown key {unknown[0]!r} (it takes {', '.join(names)})")
        if not isinstance(value.get("weights"), (list, tuple)):
            raise ConfigError(f"stage #{number} has no \"weights\" (one number for each source)")
        return cls(**value)


def check_schedule(stages: tuple[Stage, ...], names: list[str]) -> None:
    """ConfigError, one line naming the stage and the key, unless `stages` is a schedule of the mixture whose
    sources `names` names: see the module docstring."""
    first = stages[0].unit if stages else None
    for k, stage in enumerate(stages, start=1):
        where = f"stage #{k}"
        if len(stage.weights) != len(names):
            raise ConfigError(f"{where}'s \"weights\" give {len(stage.weights)} numbers for {len(names)} sources")
        for name, weight in zip(names, stage.weights):
            check_weight(weight, f"{where}'s weight of {name}")
        if not sum(stage.weights) > 0:
            raise ConfigError(f"{where}'s \"weights\" must sum to a number above 0, got {list(stage.weights)}")
        if stage.until_step is not None and stage.until_tokens is not None:
            raise ConfigError(f"{where} has both \"until_step\" and \"until_tokens\": give one")
        until = stage.until
        if until is not None and (isinstance(until, bool) or not isinstance(until, int) or until <= 0):
            raise ConfigError(f"{where}'s \"{stage.unit}\" must be a whole number above 0, got {until!r}")
        if stage.ramp is not None and stage.ramp not in RAMPS:
            raise ConfigError(f"{where}'s \"ramp\" must be {' or '.join(RAMPS)} (or none), got {stage.ramp!r}")
        if stage.ramp is not None and k == 1:
            raise ConfigError(f"{where} has \"ramp\" but no stage before it to ramp from: give it constant weights")
        if until is None and (k < len(stages) or stage.ramp is not None):
            raise ConfigError(f"{where} has no \"until_step\" or \"until_tokens\" (only the last stage may run to the "
                              "end of the data, and only with constant weights)")
        if until is not None and stage.unit != first:
            raise ConfigError(f"{where} ends by \"{stage.unit}\", stage #1 by \"{first}\": every stage of a schedule "
                              "ends by the same")
        if k > 1 and until is not None and until <= stages[k - 2].until:
            raise ConfigError(f"{where}'s \"{stage.unit}\" {until} is not after stage #{k - 1}'s "
                              f"{stages[k - 2].until}: stages go in order")


def held_after(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The stages with the one a schedule ends in: after a last stage that ends, its weights held to the end of the
    data (a stage of its own: its counts start where it begins)."""
    last = stages[-1]
    return stages + (Stage(last.weights),) if last.until is not None else stages


class Timeline:
    """A schedule laid on one reader's clock (see the module docstring): positions along it (its axis) are steps, or
    the job's tokens before a step for a schedule of `until_tokens`. Its stages are `held_after` the schedule's."""

    def __init__(self, stages: tuple[Stage, ...], clock: MixClock):
        self.stages, self.clock = held_after(stages), clock
        self.by_tokens = stages[0].unit == "until_tokens"
        self.shares = [shares_of(stage.weights) for stage in self.stages]
        self.ends = [stage.until for stage in self.stages]
        self.ramps = [stage.ramp is not None for stage in self.stages]

    def x(self, step: int) -> int:
        """Where step `step` lies on the schedule's axis: the step, or the job's tokens before it."""
        return self.clock.tokens_at(step) if self.by_tokens else step

    def start(self, k: int) -> int:
        return 0 if k == 0 else self.ends[k - 1]

    def stage_at(self, step: int, first: int = 0) -> int:
        """The stage in force at `step` (looked for from stage `first` on)."""
        x = self.x(step)
        k = max(first, 0)
        while self.ends[k] is not None and x >= self.ends[k]:
            k += 1
        return k

    def weights(self, k: int, step: int) -> tuple[float, ...]:
        """The shares in force at `step` in stage `k`: the stage's own, or on a ramp between the stage before's and
        its own by how far along it the step lies."""
        if not self.ramps[k]:
            return self.shares[k]
        f = (self.x(step) - self.start(k)) / (self.ends[k] - self.start(k))
        return tuple(p + (q - p) * f for p, q in zip(self.shares[k - 1], self.shares[k]))

    def steps(self, k: int) -> tuple[int, int | None]:
        """The job steps stage `k` spans on this reader's clock: [from, to), to None for the end of the data."""
        def step(x: int | None) -> int | None:
            if x is None:
                return None
            return self.clock.step_reaching(x) if self.by_tokens else x
        return step(self.start(k)), step(self.ends[k])

    def targets(self, k: int, begun: int, now: int) -> list[float]:
        """Each source's tokens that ramp `k`'s weights ask for over the reader's tokens [begun, now): the integral of
        the weights in force, which inside a stage are linear in the reader's batch number q (a batch's tokens have
        its step's weights), in closed form: A (now - begun) + B (G(now) - G(begun)), G(t) the sum of q over the
        tokens before t."""
        c = self.clock
        per_batch = c.workers * (c.batch * c.ranks if self.by_tokens else 1)  # the axis's advance per reader batch
        x0 = self.x(c.step_of(0))  # where the reader's batch 0 lies on the axis
        lo, span = self.start(k), self.ends[k] - self.start(k)

        def g(t: int) -> int:
            m = t // c.batch
            return c.batch * m * (m - 1) // 2 + (t - m * c.batch) * m

        width, moments = now - begun, g(now) - g(begun)
        return [(p + (q - p) * (x0 - lo) / span) * width + (q - p) * per_batch / span * moments
                for p, q in zip(self.shares[k - 1], self.shares[k])]


def first_out_of_data(stages: tuple[Stage, ...], clock: MixClock, held: dict[int, int], names: list[str]) -> str | None:
    """Where a stage ends past what a source that ends the mix holds (`held`: its tokens, by source number, for
    the sources whose tokens are known): the job's tokens each stage asks of it (its shares, a ramp's their mean)
    summed up to each stage's end, against what it holds; None when every end is reachable."""
    timeline = Timeline(stages, clock)
    asked = dict.fromkeys(held, 0.0)
    before = 0
    for k, stage in enumerate(stages):
        if stage.until is None:
            break
        end = stage.until if timeline.by_tokens else clock.tokens_at(stage.until)
        mean = [(p + q) / 2 for p, q in zip(timeline.shares[k - 1], timeline.shares[k])] if stage.ramp \
            else timeline.shares[k]
        for i in held:
            asked[i] += mean[i] * (end - before)
            if asked[i] > held[i]:
                return (f"stage #{k + 1}'s \"{stage.unit}\" {stage.until} lies past the end of the data: by then the "
                        f"schedule takes about {asked[i]:,.0f} tokens of {names[i]}, which ends the mix "
                        f"(first_exhausted) and holds {held[i]:,}")
        before = end
    return None


def check_reach(children: list, stops: tuple, stages: tuple[Stage, ...], clock: MixClock, epochs: int,
                names: list[str]) -> None:
    """ConfigError when a stage ends past the tokens a source that ends the mix holds in `epochs` epochs, where they
    are known (a token directory's manifest: `pretokenized()`); `names` names the sources."""
    held = {}
    for i, (child, stop) in enumerate(zip(children, stops)):
        shards = child.pretokenized() if stop == "first_exhausted" else None
        if shards is not None:
            held[i] = epochs * sum(int(s.get("tokens") or 0) for s in shards.manifest.get("shards") or ())
    why = first_out_of_data(stages, clock, held, names) if held else None
    if why is not None:
        raise ConfigError(f"a mix's schedule: {why}")

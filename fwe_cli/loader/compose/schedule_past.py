"""A schedule changed in a running job: what may change and what may not. A state records where its stream stood in
its mix's schedule (the stage in force and the reader's clock, so the step: compose.mix_positions.ScheduledCursor);
a loader resuming it with another schedule follows the new one when the stages up to that step are the same (an
anneal added, a later stage moved or reweighted), and refuses it in one line naming the first stage that differs
otherwise: what was read under the old stages cannot be read again under new ones. A mix without a schedule is one
stage of its weights: a schedule whose first stage holds them, in force at the saved step, continues it.
"""

from __future__ import annotations

from fwe_cli.errors import ConfigError
from fwe_cli.loader.compose.mix_positions import MixClock, MixtureCursor, ScheduledCursor
from fwe_cli.loader.compose.schedule import Stage, held_after, shares_of
from fwe_cli.loader.sources.order import StreamOrder
from fwe_cli.loader.sources.position import Position

UNSCHEDULED_WORLD = ("resume states of a mix without a schedule, continued by another world, cannot take a schedule "
                     "(the step they were saved at is lost): resume them with the world that saved them first")


def keep_future(saved: dict, now: dict, reached: Position | None, order: StreamOrder) -> dict:
    """A state's pinned mixture node (`saved`) as a loader whose own is `now` may take it: with `now`'s ids (names
    only) and, when its schedule differs only after the step of `reached` (the cursor of the furthest document the
    state's stream had taken: the last step a choice was made at), with `now`'s schedule and weights; ConfigError
    naming the first stage that differs when the past would change. A cursor of a mix without a schedule is placed
    on the steps by the reader's `order` (a world begun at step 0: a changed world's is refused when it opens)."""
    saved = {"schedule": [], **saved, "ids": now.get("ids")}
    if saved["schedule"] == now.get("schedule") or not (saved["schedule"] or now.get("schedule")):
        return saved
    try:
        old, new = _stages(saved), _stages(now)
    except (ConfigError, TypeError):
        return saved  # (not a schedule this fwe reads: compared as it is)
    if saved.get("by") != now.get("by"):
        return saved  # (another `by` is another mix: compared as it is, naming it)
    if isinstance(reached, ScheduledCursor):
        k, clock, step = reached.stage, reached.origin, reached.step
    elif isinstance(reached, MixtureCursor) and not saved["schedule"]:
        clock = MixClock.begun(order.readers, order.workers, order.batch_tokens, None)
        k, step = 0, clock.step_of(sum(reached.counts))
    else:
        raise ConfigError("resume state's mix has another schedule and records no place in it: resume with the same "
                          "schedule, or start without the state")
    why = past_differs(old, new, k, step, clock)
    if why is not None:
        kind = "" if saved["schedule"] else " (a mix without one: a stage of its weights)"
        raise ConfigError(f"resume state had read into step {step:,}, in stage #{k + 1} of its mix's schedule{kind}, "
                          f"and this loader's schedule changes what was read: {why}; a schedule may change after the "
                          "saved step only: resume with the same stages up to it, or start without the state")
    return dict(saved, schedule=now.get("schedule"), weights=now.get("weights"))


def _stages(node: dict) -> tuple[Stage, ...]:
    """A pinned mixture's schedule, or its fixed weights as one stage."""
    stages = tuple(Stage.of(stage, k) for k, stage in enumerate(node.get("schedule") or (), 1))
    return stages or (Stage(tuple(node.get("weights") or ())),)


def past_differs(old: tuple[Stage, ...], new: tuple[Stage, ...], k: int, step: int, clock: MixClock) -> str | None:
    """What of the schedule `new` changes the past of a stream saved under `old` in stage `k` (of `held_after`'s)
    at job step `step` (on `clock`'s steps), in words naming the first stage that differs; None when they agree up
    to there. The stages before `k` must be the same; stage `k` too, but that one of constant weights may end
    elsewhere while it is still in force at the saved step."""
    old, new = held_after(old), held_after(new)
    for j in range(k + 1):
        if j >= len(new):
            return f"stage #{j + 1} is missing now"
        was, now = old[j], new[j]
        if shares_of(was.weights) != shares_of(now.weights):
            return f"stage #{j + 1}'s weights were {list(was.weights)}, now {list(now.weights)}"
        if was.ramp != now.ramp:
            return f"stage #{j + 1}'s ramp was {was.ramp or 'none'}, now {now.ramp or 'none'}"
        if (j < k or was.ramp) and (was.unit, was.until) != (now.unit, now.until):
            return f"stage #{j + 1} ended at {_end(was)}, now at {_end(now)}"
    end = new[k].until
    if end is not None:
        x = clock.tokens_at(step) if new[k].unit == "until_tokens" else step
        if x >= end:
            return f"stage #{k + 1}'s {new[k].unit} {end} now ends it before step {step:,}, which it read"
    return None


def _end(stage: Stage) -> str:
    return f"{stage.unit} {stage.until}" if stage.until is not None else "the end of the data"

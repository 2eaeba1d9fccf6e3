"""Elastic resume: the per-rank states of a world of N ranks, restored by a world of M (more or fewer), so that over
the whole job every document is delivered exactly once, token for token, in a deterministic order.

Document i of an epoch (its place in the epoch's order, shuffle included: sources.order) belongs to rank i % N.
Each state records how far its rank got (`consumed`: the document its last batch ended in, and how many of that
document's tokens it delivered). In the saved epoch the documents left are, for each old rank, its documents after
that one, and the rest of that one. Below R, the first index past every old rank's progress, they are a short list;
from R on, every document is left. The new world numbers the documents left in order (j = 0, 1, ...) and rank m takes
those with j % M == m: the ones of the list by name (`taken`, with the tokens of each already delivered), and from R
on the documents i with (i - base) % M == m (base = R minus the length of the list). Later epochs are split by
i % M as usual. A plan of that form is also what a rank of the new world saves, so a world can change again before
the epoch ends.

    states = [json.load(open(f)) for f in sorted(glob.glob("ckpt/loader_rank*.json"))]   # every rank's, N of them
    loader = FineWebLoader(config, state=states)   # config.shard: this rank of the new world (RANK/WORLD_SIZE)
"""

from __future__ import annotations

from dataclasses import dataclass


from fwe_cli.errors import ConfigError
from fwe_cli.loader.shard import Shard


@dataclass(frozen=True)
class ElasticPlan:
    """Which documents of `epoch` a rank of a changed world delivers (see the module docstring); other epochs: plain."""

    epoch: int
    mod: int
    rem: int
    taken: tuple[tuple[int, int], ...]
    """(document, tokens of it delivered already) below `start` that this rank delivers, in order."""
    start: int
    """From here on, document i is this rank's when (i - base) % mod == rem."""
    base: int

    def owns(self, epoch: int, index: int) -> bool:
        if epoch != self.epoch:
            return epoch > self.epoch and index % self.mod == self.rem
        if index >= self.start:
            return (index - self.base) % self.mod == self.rem
        return index in self._taken

    def delivered(self, epoch: int, index: int) -> int:
        """Tokens of document `index` another rank delivered before the world changed (0 for most)."""
        return self._taken.get(index, 0) if epoch == self.epoch else 0

    @property
    def _taken(self) -> dict[int, int]:
        cached = self.__dict__.get("_taken_map")
        if cached is None:
            cached = dict(self.taken)
            object.__setattr__(self, "_taken_map", cached)
        return cached

    def to_dict(self) -> dict:
        return {"epoch": self.epoch, "mod": self.mod, "rem": self.rem, "taken": [list(t) for t in self.taken],
                "start": self.start, "base": self.base}

    @classmethod
    def from_dict(cls, data: dict) -> "ElasticPlan":
        return cls(int(data["epoch"]), int(data["mod"]), int(data["rem"]),
                   tuple((int(i), int(t)) for i, t in data["taken"]), int(data["start"]), int(data["base"]))


def plain(shard: Shard, epoch: int = 0) -> ElasticPlan:
    """A plain shard written as a plan: nothing taken by name, every index split by i % mod."""
    return ElasticPlan(epoch, shard.mod, shard.rem, (), 0, 0)


def _owned_after(plan: ElasticPlan, after: int, below: int) -> list[int]:
    """The old rank's documents of its plan's epoch with after < i < below."""
    found = [i for i, _t in plan.taken if after < i < below]
    first = max(plan.start, after + 1)
    first += (plan.rem - (first - plan.base)) % plan.mod
    return found + list(range(first, below, plan.mod))


def replan(states: list[dict], shard: Shard) -> tuple[ElasticPlan, dict]:
    """The plan of rank `shard.rem` of a world of `shard.mod` that continues the N ranks of `states` (each a
    `state_dict()` of theirs, every rank's once), and the position its stream starts reading from. ConfigError
    (naming what) for states that do not make one whole world, or were saved in different epochs."""
    old_mod = len(states)
    plans = []
    frontiers = []
    for state in states:
        matching = state["matching"]
        if matching["shard_mod"] != old_mod:
            raise ConfigError(f"the {old_mod} resume states are not one world: one was saved by a rank of "
                              f"shard_mod={matching['shard_mod']}; give every rank's state of one world, once")
        saved = state.get("plan")
        plans.append(ElasticPlan.from_dict(saved) if saved else plain(Shard(old_mod, matching["shard_rem"])))
        frontiers.append(_frontier(state))
    if sorted(p.rem for p in plans) != list(range(old_mod)):
        raise ConfigError(f"the {old_mod} resume states do not hold each rank 0..{old_mod - 1} once (shard_rem "
                          f"{sorted(p.rem for p in plans)}): give every rank's state of one world, once")
    epochs = {f[0] for f in frontiers if f is not None}
    if len(epochs) > 1:
        raise ConfigError(f"the resume states were saved while ranks were in different epochs ({sorted(epochs)}): "
                          f"resume them with the {old_mod} ranks they were saved by, and change the world size at a "
                          "later checkpoint")
    epoch = epochs.pop() if epochs else 0
    plans = [p if p.epoch == epoch else plain(Shard(p.mod, p.rem), epoch) for p in plans]
    left: list[tuple[int, int]] = []
    start = max([p.start for p in plans] + [f[1] + 1 for f in frontiers if f is not None])
    for plan, frontier in zip(plans, frontiers):
        done = -1 if frontier is None else frontier[1]
        if frontier is not None and frontier[2] < frontier[3]:  # the document its last batch ended inside
            left.append((done, frontier[2] + plan.delivered(epoch, done)))
        left += [(i, plan.delivered(epoch, i)) for i in _owned_after(plan, done, start)]
    left.sort()
    mine = tuple(item for j, item in enumerate(left) if j % shard.mod == shard.rem)
    new = ElasticPlan(epoch, shard.mod, shard.rem, mine, start, start - len(left))
    if any(s.get("position") is None for s in states):  # a rank that received nothing: from the epoch's start
        return new, None
    first = min((s["position"]["doc"] for s in states), key=lambda r: (r["epoch"], r["index"]))
    return new, {"doc": dict(first, k=0), "skip": 0}


@dataclass(frozen=True)
class ChildPlans:
    """For a source that orders its children itself (a mixture), after a change of world size: each child's plan
    and the document (a `resume`, as JSON) its stream starts reading from, None for a child this rank starts at its
    epoch's start."""

    plans: tuple
    starts: tuple

    def plan(self, child: int) -> ElasticPlan | None:
        return self.plans[child] if child < len(self.plans) else None

    def to_dict(self) -> dict:
        return {"children": [p.to_dict() if p is not None else None for p in self.plans], "starts": list(self.starts)}

    @classmethod
    def from_dict(cls, data: dict) -> "ChildPlans":
        return cls(tuple(ElasticPlan.from_dict(p) if p else None for p in data["children"]),
                   tuple(data.get("starts") or [None] * len(data["children"])))


def saved_plan(data: dict | None) -> ElasticPlan | ChildPlans | None:
    """The plan a state saved (`state["plan"]`): a rank's, or its children's."""
    if not data:
        return None
    return ChildPlans.from_dict(data) if "children" in data else ElasticPlan.from_dict(data)


def replan_children(states: list[dict], shard: Shard, count: int) -> ChildPlans:
    """`replan` for each of the `count` children of a source that orders its children itself: every rank's state
    records, per child, the document its stream goes on from and the one it has consumed (`position.children`)."""
    plans, starts = [], []
    for c in range(count):
        per_rank = []
        for state in states:
            matching, saved = state["matching"], state.get("plan") or {}
            child = (state.get("position") or {}).get("children", [None] * count)[c]
            plan = (saved.get("children") or [None] * count)[c] if "children" in saved else None
            per_rank.append({"matching": {"shard_mod": matching["shard_mod"], "shard_rem": matching["shard_rem"]},
                             "position": child, **({"plan": plan} if plan else {})})
        plan, position = replan(per_rank, shard)
        plans.append(plan)
        starts.append(position["doc"] if position else None)
    return ChildPlans(tuple(plans), tuple(starts))


def _frontier(state: dict) -> tuple[int, int, int, int] | None:
    """(epoch, document, tokens of it delivered, its tokens) of the last batch a state's rank received; None when it
    received none."""
    position = state.get("position")
    if position is None:
        return None
    consumed = position.get("consumed")
    if consumed is None:
        raise ConfigError("a resume state has no `consumed` document (saved by an fwe that did not record it): resume "
                          "it with the world size it was saved by")
    return tuple(int(v) for v in consumed)

"""Dealing an epoch to its readers before anything is read, and dealing again what a world left when it changes.

A reader is a rank x DataLoader worker (loader.shard: reader `rem` of `mod`). Reader r of R takes the stretch
[r·T // R, (r+1)·T // R) of an epoch line of length T (sources.units): a pure function of the listing, seed, epoch
and readers, so every reader knows its own share without asking anyone, and reads nothing else. The readers of a rank
hold adjacent stretches: together exactly the rank's share, whatever its num_workers.

A share is a tuple of `Span`s; a fresh one is one span. When a world of readers stops (each saved where it is: its
`Cursor`, sources.order) and another resumes, each old reader's `leftover` is a few spans: the rest of the window it
was in (which a window's permutation makes no stretch: a `rest` span, read whole by one new reader), the rest of its
span, its later spans. `Leftovers` lays every old reader's leftover end to end and gives new reader m its stretch
of that, by the same rule: every document is delivered exactly once over both worlds, and a world may change again.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.position import Position


@dataclass(frozen=True, slots=True)
class Span(Position, name="span"):
    """The documents anchored in [lo, hi) of an epoch's line, those of the unit `lo` lies in only after position `at`
    (None: all of them); with `rest`, only the first window (of the shuffle's size) read from there, of whose
    permuted documents the first `skip` were delivered, and `delivered` tokens of the next."""

    lo: int
    hi: int
    at: Position | None = None
    skip: int = 0
    delivered: int = 0
    rest: int = 0

    @property
    def weight(self) -> int:
        """What dealing counts it as: its length on the line, a rest of a window as 1 (it is a window at most)."""
        return 1 if self.rest else max(self.hi - self.lo, 0)


@dataclass(frozen=True, slots=True)
class Share(Position, name="share"):
    """The spans of epoch `epoch` one reader delivers, in order (after that epoch: a fresh share each epoch)."""

    epoch: int
    spans: tuple


def fresh(total: int, readers: Shard) -> tuple[Span, ...]:
    """Reader `readers.rem` of `readers.mod`'s stretch of a line of length `total`."""
    r, n = readers.rem, readers.mod
    return (Span(r * total // n, (r + 1) * total // n),)


def leftover(spans: tuple, cursor, delivered: int, tokens: int) -> list[Span]:
    """What a reader leaves of its `spans` when the last batch it delivered ended in the document at `cursor` (a
    sources.order.Cursor), `delivered` of the `tokens` that document put in its stream."""
    current, window, k = spans[cursor.span], cursor.window, cursor.k
    first_window = (window.x, window.at) == (current.lo, current.at)
    before = current.delivered if first_window and k == current.skip else 0  # tokens another world delivered
    k_next, begun = (k + 1, 0) if delivered >= tokens else (k, before + delivered)
    out = []
    if k_next == 0 and begun == 0:  # nothing of the window delivered: it is read again from its start
        out.append(current if first_window else Span(window.x, current.hi, window.at, 0, 0, current.rest))
    else:
        if k_next < window.n:
            out.append(Span(window.x, current.hi, window.at, k_next, begun, 1))
        if not current.rest:
            out.append(Span(window.end_x, current.hi, window.end_at))
    out.extend(spans[cursor.span + 1:])
    return [s for s in out if s.rest or s.hi > s.lo]


class Leftovers:
    """What a world left, laid end to end by weight, from which each reader of a new world takes its stretch by the
    rule fresh shares follow: a plain span is cut where stretches meet (the part after a cut reads from the cut, the
    floor `at` stays with the first part), a rest of a window goes whole to the reader whose stretch holds its start.
    Made once, it deals any reader in O(log n) plus its own spans."""

    def __init__(self, spans: Iterable[Span]):
        self.spans = [s for s in spans]
        self.starts = list(itertools.accumulate((s.weight for s in self.spans), initial=0))

    def share(self, readers: Shard) -> tuple[Span, ...]:
        """Reader `readers.rem` of `readers.mod`'s spans."""
        total, r, n = self.starts[-1], readers.rem, readers.mod
        a, b = r * total // n, (r + 1) * total // n
        mine = []
        for i in range(max(bisect.bisect_right(self.starts, a) - 1, 0), len(self.spans)):
            s, c = self.spans[i], self.starts[i]
            if c >= b:
                break
            if s.rest:
                if a <= c:
                    mine.append(s)
                continue
            lo, hi = max(a, c), min(b, c + s.weight)
            if lo < hi:
                start = s.lo + lo - c
                mine.append(Span(start, s.lo + hi - c, s.at if start == s.lo else None))
        return tuple(mine)


@dataclass(frozen=True, slots=True)
class Frontier(Position, name="frontier"):
    """Where a reader of a source read by units stood when it saved: its last batch ended `delivered` tokens into the
    document at `cursor` (sources.order.Cursor), which put `tokens` in its stream."""

    cursor: Position
    delivered: int
    tokens: int


class Ended(NamedTuple):
    """The document a reader's last batch ended in, as its stream holds it: its cursor, tokens of it delivered, its
    tokens (what `Source.frontier` turns into the source's frontier; a warm start's kept batches keep it too)."""

    cursor: object
    delivered: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Pending(Position, name="pending"):
    """An old reader's plan not dealt yet (its state was saved before its source opened): what reader `rem` of `mod`
    was to be dealt from `olds` ((plan, frontier) of each reader before it), dealt when a source opens."""

    olds: tuple
    mod: int
    rem: int


def dealt(source, plan: Position | None) -> Position | None:
    """`plan`, or, for a Pending one, what `source` deals it now."""
    return source.plan_for(list(plan.olds), Shard(plan.mod, plan.rem)) if isinstance(plan, Pending) else plan


def leaf_share(source, olds: list[tuple[Share | None, Frontier | None]], readers: Shard) -> Share:
    """The share of reader `readers` of a new world that continues the old readers of `source`, each given as (the
    share it was dealt, None for its fresh one; its frontier, None when it delivered nothing), in their order: every
    old reader's leftover (in the one epoch they were all in) dealt again (`Leftovers`). ConfigError when they were
    in different epochs."""
    from fwe_cli.errors import ConfigError

    olds = [(dealt(source, share), front) for share, front in olds]
    epochs = {f.cursor.epoch if f is not None else s.epoch for s, f in olds if f is not None or s is not None}
    if len(epochs) > 1:
        raise ConfigError(f"the resume states were saved while readers were in different epochs ({sorted(epochs)}): "
                          f"resume them with the {len(olds)} readers they were saved by, and change the world size at "
                          "a later checkpoint")
    epoch = epochs.pop() if epochs else 0
    total = None
    left: list[Span] = []
    for number, (share, front) in enumerate(olds):
        if share is not None and share.epoch == epoch:
            spans = share.spans
        else:
            total = sum(u.hi - u.lo for u in source.units()) if total is None else total  # the line's length
            spans = fresh(total, Shard(len(olds), number))
        left += list(spans) if front is None else leftover(spans, front.cursor, front.delivered, front.tokens)
    return Share(epoch, Leftovers(left).share(readers))

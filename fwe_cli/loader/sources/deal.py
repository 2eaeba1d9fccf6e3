"""Dealing an epoch to its readers before anything is read, and dealing again what a world left when it changes.

A reader is a rank x DataLoader worker (shard: reader `rem` of `mod`). Reader r of R takes the stretch
[r·T // R, (r+1)·T // R) of an epoch line of length T (sources.units): a pure function of the listing, seed, epoch
and readers, so every reader knows its own share without asking anyone, and reads nothing else. The readers of a rank
hold adjacent stretches: together exactly the rank's share, whatever its num_workers.

A reader's spans of an epoch are a tuple of `Span`s; a fresh share is one span. When a world of readers stops (each
saved where it is: its `Cursor`, sources.order) and another resumes, each old reader's `leftover` is a few spans:
the rest of the window it was in (which a window's permutation makes no stretch: a `rest` span, read whole by one new
reader), the rest of its span, its later spans. `Leftovers` lays every old reader's leftover end to end and gives
new reader m its stretch of that, by the same rule, epoch by epoch where the old readers had stopped in different
ones (`leaf_share`, a `Share` of several epochs): every document is delivered exactly once over both worlds, and a
world may change again. What a whole reader left, replays of best-fit buffers included, is state.elastic's.
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
class Share(Position, name="share", version=2):
    """What one reader delivers of epochs `epoch`, `epoch` + 1, ...: a tuple of spans for each, in order (after them,
    a fresh share each epoch). A world that stopped with its readers in several epochs leaves each of them."""

    epoch: int
    spans: tuple

    def of(self, epoch: int) -> tuple | None:
        """The spans of `epoch`, or None where the share says nothing of it (a fresh share then)."""
        i = epoch - self.epoch
        return self.spans[i] if 0 <= i < len(self.spans) else None


def plan_epoch(plan: Position | None, default: int) -> int:
    """The first epoch a plan deals (a composite's: the earliest of its children's), else `default`."""
    if isinstance(plan, Share):
        return plan.epoch
    children = [plan_epoch(child, default) for child in getattr(plan, "children", ()) if child is not None]
    return min(children, default=default)


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


def leaf_share(source, olds: list[tuple[Share | None, Frontier | None]], order) -> Share:
    """The share of the reader `order.readers` of a new world that continues the old readers of `source`, each given
    as (the share it was dealt, None for its fresh one; its frontier, None when it delivered nothing), in their
    order. The old readers may have stopped in different epochs (a cycled source of a mixture cycles at each reader's
    own pace, a reader may finish an epoch before another): for each epoch from the earliest to the latest, what each
    reader had left of it (nothing of an epoch it had finished, all of one it had not begun) is dealt again
    (`Leftovers`), so every document of each of those epochs is delivered once over both worlds."""
    at = [front.cursor.epoch if front is not None else share.epoch if share is not None else order.first
          for share, front in olds]
    total = None
    epochs = []
    for epoch in range(min(at), max(at) + 1):
        left: list[Span] = []
        for number, ((share, front), reached) in enumerate(zip(olds, at)):
            if reached > epoch:
                continue
            spans = share.of(epoch) if share is not None else None
            if spans is None:
                total = sum(u.hi - u.lo for u in source.units()) if total is None else total  # the line's length
                spans = fresh(total, Shard(len(olds), number))
            left += list(spans) if reached < epoch or front is None else \
                leftover(spans, front.cursor, front.delivered, front.tokens)
        epochs.append(Leftovers(left).share(order.readers))
    return Share(min(at), tuple(epochs))

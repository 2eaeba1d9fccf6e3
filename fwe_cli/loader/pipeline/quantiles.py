"""Percentiles: of a list of values (exact), and of a stream of them in a structure that does not grow (a sketch).

`percentile` interpolates linearly between the two order statistics around a rank (numpy's default method); it reads
any ordered sequence, a sorted list or a `Quantiles` sketch's `ordered()` view, so both give percentiles the same way.

`Quantiles` is what a run keeps of a value per step (a week-long job's fetch latencies): counts in logarithmic
buckets, bucket i holding the values in (G^(i-1), G^i] with G = (1 + A) / (1 - A), A = RELATIVE_ACCURACY. A value
stands for its bucket as 2 G^i / (G + 1), within A of every value in it relatively, so each order statistic is
within A of the exact one, and so is an interpolation between two of them (a weighted mean of values each within
A). Zeros are counted apart (exact); the exact count, sum, min and max are kept beside the buckets, and the first and
last order statistics are the exact min and max. At most MAX_BUCKETS buckets are kept: a stream spanning more
(over 8 decades) folds its lowest buckets into one, so the low percentiles lose their accuracy first, never the high
ones, which are what a stall shows in.
"""

from __future__ import annotations

import bisect
import math
from typing import Sequence

RELATIVE_ACCURACY = 0.005
"""Every percentile is within this fraction of the exact one (half a percent: well inside the 1 % promised)."""
MAX_BUCKETS = 2048
"""Buckets kept at most: G^2048 spans about 8.9 decades at the accuracy above (1 us to over 10 minutes)."""


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of ordered values, interpolated linearly between ranks (numpy's default method).

    Plain Python: numpy's first np.percentile call in a process loads its lazy submodules, which costs a short run
    (a smoke's summary after one batch) more than the sorting does."""
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(ordered: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99/max in milliseconds of ordered durations in seconds (None when there are none)."""
    if not len(ordered):
        return {"p50": None, "p95": None, "p99": None, "max": None}
    return {"p50": round(percentile(ordered, 50) * 1000.0, 4), "p95": round(percentile(ordered, 95) * 1000.0, 4),
            "p99": round(percentile(ordered, 99) * 1000.0, 4), "max": round(ordered[-1] * 1000.0, 4)}


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99/max in milliseconds of a list of durations in seconds, exact (None when empty): for lists that
    are small by nature (a rolling window, one run's heartbeat lines); a stream is a `Quantiles`."""
    return summary_ms(sorted(float(s) for s in seconds))


_GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_PER_LOG = 1.0 / math.log(_GAMMA)
_NO_FLOOR = -(1 << 62)  # below any bucket index a float can have
_log, _ceil = math.log, math.ceil  # `add` runs once per step: module-level names, no attribute look-ups


class Quantiles:
    """Percentiles of a stream of non-negative values within RELATIVE_ACCURACY, in at most MAX_BUCKETS counts.

        fetch = Quantiles()
        fetch.add(0.0123)             # each step
        fetch.percentiles_ms()        # {"p50", "p95", "p99", "max"}, as percentiles_ms of every value would give
    """

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.zeros = 0
        self.buckets: dict[int, int] = {}
        """Bucket index -> how many values fell in it (values > 0 only)."""
        self._low = math.inf
        self._high = -math.inf
        self._floor = _NO_FLOOR  # once buckets were folded: the lowest index kept, where lower values go

    def add(self, value: float) -> None:
        """Count one value (ValueError for a negative one or NaN)."""
        if value > 0.0:
            index = _ceil(_log(value) * _PER_LOG)
            if index < self._floor:
                index = self._floor
            buckets = self.buckets
            held = buckets.get(index)
            if held is None:
                buckets[index] = 1
                if len(buckets) > MAX_BUCKETS:
                    self._fold()
            else:
                buckets[index] = held + 1
        elif value == 0.0:
            self.zeros += 1
        else:
            raise ValueError(f"Quantiles counts values >= 0, got {value!r}")
        self.count += 1
        self.total += value
        if value < self._low:
            self._low = value
        if value > self._high:
            self._high = value

    def _fold(self) -> None:
        """Fold the lowest bucket into the next one up, which becomes the floor."""
        lowest, floor = sorted(self.buckets)[:2]
        self.buckets[floor] += self.buckets.pop(lowest)
        self._floor = floor

    @property
    def min(self) -> float | None:
        return self._low if self.count else None

    @property
    def max(self) -> float | None:
        return self._high if self.count else None

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def ordered(self) -> "OrderedView":
        """The values as an ordered sequence of estimates (len, [rank]), for `percentile`: a snapshot."""
        return OrderedView(self)

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0-100), within RELATIVE_ACCURACY of the exact one; None before any value."""
        return percentile(self.ordered(), q) if self.count else None

    def percentiles_ms(self) -> dict[str, float | None]:
        """p50/p95/p99/max in milliseconds of durations added in seconds (the max exact), as `percentiles_ms`."""
        return summary_ms(self.ordered())


class OrderedView:
    """A `Quantiles` as the sorted sequence of its values' estimates: view[rank] (0-based, negative from the end) is
    the rank-th smallest value's bucket estimate, clamped to the exact min and max, which are ranks 0 and -1."""

    def __init__(self, sketch: Quantiles):
        self._count, self._zeros = sketch.count, sketch.zeros
        self._min, self._max = sketch.min, sketch.max
        self._indexes = sorted(sketch.buckets)
        self._ends: list[int] = []  # the rank after each bucket's last value
        end = sketch.zeros
        for index in self._indexes:
            end += sketch.buckets[index]
            self._ends.append(end)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, rank: int) -> float:
        if rank < 0:
            rank += self._count
        if not 0 <= rank < self._count:
            raise IndexError(f"rank {rank} of {self._count} values")
        if rank == 0:
            return self._min
        if rank == self._count - 1:
            return self._max
        if rank < self._zeros:
            return 0.0
        index = self._indexes[bisect.bisect_right(self._ends, rank)]
        estimate = 2.0 * _GAMMA ** index / (_GAMMA + 1.0)
        return min(max(estimate, self._min), self._max)

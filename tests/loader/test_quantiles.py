"""Percentiles (loader.pipeline.quantiles): exact ones of a list, and the sketch a run keeps instead of every value, which must
stay within 1 % of exact (numpy's linear method) at p50/p95/p99 and must not grow with the number of values."""

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwe_cli.loader.pipeline.quantiles import MAX_BUCKETS, RELATIVE_ACCURACY, Quantiles, percentile, percentiles_ms

GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)


def _values(kind: str, n: int, seed: int, scale: float) -> np.ndarray:
    """n values of one of several shapes a latency takes (all >= 0, spanning well under 8 decades)."""
    rng = np.random.default_rng(seed)
    if kind == "lognormal":
        values = rng.lognormal(0.0, 2.0, n)
    elif kind == "exponential":
        values = rng.exponential(1.0, n)
    elif kind == "uniform":
        values = rng.uniform(0.5, 1.5, n)
    elif kind == "pareto":  # a heavy tail: rare waits hundreds of times the usual
        values = 1.0 + rng.pareto(1.2, n)
    elif kind == "bimodal":  # hand-offs from the queue, and waits on the producer
        values = np.where(rng.random(n) < 0.9, rng.normal(1.0, 0.05, n), rng.normal(400.0, 30.0, n))
    elif kind == "few_distinct":  # many ties
        values = rng.choice([1.0, 2.0, 2.5, 70.0], n)
    else:  # "with_zeros": a clock too coarse to see the shortest waits
        values = np.where(rng.random(n) < 0.3, 0.0, rng.exponential(1.0, n))
    return np.abs(values) * scale


KINDS = ["lognormal", "exponential", "uniform", "pareto", "bimodal", "few_distinct", "with_zeros"]


@settings(derandomize=True, database=None, deadline=None, max_examples=300)
@given(kind=st.sampled_from(KINDS), n=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1e-6, 1e-3, 1.0, 1e3]))
def test_sketch_percentiles_are_within_one_percent_of_exact(kind, n, seed, scale):
    """On varied distributions, sizes and scales, the sketch's p50/p95/p99 are within RELATIVE_ACCURACY (0.5 %, so
    within the 1 % promised) of numpy's linear-interpolation percentiles of all the values; max, min, count and mean
    are exact."""
    values = _values(kind, n, seed, scale)
    sketch = Quantiles()
    for value in values.tolist():
        sketch.add(value)
    for q in (50, 95, 99):
        exact = float(np.percentile(values, q))
        got = sketch.percentile(q)
        assert abs(got - exact) <= RELATIVE_ACCURACY * exact * (1 + 1e-9) + 1e-300, (q, got, exact)
        assert abs(got - exact) <= 0.01 * exact + 1e-300
    assert sketch.max == values.max() and sketch.min == values.min() and sketch.count == n
    assert sketch.mean == pytest.approx(float(values.mean()), rel=1e-9)
    summary = sketch.percentiles_ms()
    assert summary["max"] == round(float(values.max()) * 1000.0, 4)
    assert summary["p95"] == round(sketch.percentile(95) * 1000.0, 4)


@settings(derandomize=True, database=None, deadline=None, max_examples=200)
@given(values=st.lists(st.floats(0.0, 1e6, allow_nan=False, allow_subnormal=False), min_size=1, max_size=300))
def test_the_ordered_view_is_sorted_and_ends_at_the_exact_extremes(values):
    """view[rank] estimates the rank-th smallest value: non-decreasing, within RELATIVE_ACCURACY of the exact order
    statistic, the exact min and max at its ends (a negative rank counts from the end)."""
    sketch = Quantiles()
    for value in values:
        sketch.add(value)
    view = sketch.ordered()
    exact = sorted(values)
    estimates = [view[rank] for rank in range(len(view))]
    assert len(view) == len(values) and estimates == sorted(estimates)
    assert view[0] == exact[0] and view[-1] == exact[-1]
    for got, want in zip(estimates, exact):
        assert abs(got - want) <= RELATIVE_ACCURACY * want * (1 + 1e-9)
    with pytest.raises(IndexError):
        view[len(values)]


def test_sketch_size_does_not_grow_with_the_number_of_values():
    """What a sketch holds depends on the span of its values, never on how many there are: 10^3 and 10^5 values of
    the same 500 distinct latencies fill the same buckets, and 10^5 values from 1 us to 10 s fit in the buckets that
    span needs (ln(10^7) / ln(G), and one more at each end)."""
    latencies = [random.Random(7).lognormvariate(-7.0, 1.5) for _ in range(500)]
    sketch = Quantiles()
    for value in latencies * 2:
        sketch.add(value)
    after_thousand = dict.fromkeys(sketch.buckets)
    for _ in range(99):
        for value in latencies:
            sketch.add(value)
    assert sketch.count == 50_500 and dict.fromkeys(sketch.buckets) == after_thousand

    wide = Quantiles()
    rng = random.Random(3)
    for _ in range(100_000):
        wide.add(10 ** rng.uniform(-6, 1))
    assert len(wide.buckets) <= math.log(1e7) / math.log(GAMMA) + 2


def test_a_stream_wider_than_the_buckets_folds_its_lowest_and_keeps_the_high_percentiles():
    """Values spanning 600 decades: at most MAX_BUCKETS buckets are kept, the lowest folded into one, and p99 (the
    tail a stall shows in) and max stay as accurate as ever."""
    rng = np.random.default_rng(5)
    values = 10 ** rng.uniform(-300, 300, 20_000)
    sketch = Quantiles()
    for value in values.tolist():
        sketch.add(value)
    assert len(sketch.buckets) == MAX_BUCKETS and sketch.count == 20_000
    exact = float(np.percentile(values, 99))
    assert abs(sketch.percentile(99) - exact) <= RELATIVE_ACCURACY * exact * (1 + 1e-9)
    assert sketch.max == values.max()


def test_sketch_refuses_a_negative_value_and_reports_nothing_before_one():
    """An empty sketch has no percentiles (None, like an empty list); a negative value or NaN is refused, not
    silently folded into the zeros."""
    sketch = Quantiles()
    assert sketch.percentile(50) is None and sketch.mean is None
    assert sketch.percentiles_ms() == {"p50": None, "p95": None, "p99": None, "max": None} == percentiles_ms([])
    for bad in (-1e-9, float("nan")):
        with pytest.raises(ValueError):
            sketch.add(bad)
    assert sketch.count == 0


@pytest.mark.parametrize("n", [1, 2, 3, 20, 1001])
def test_percentiles_match_numpys_linear_method(n):
    """percentiles_ms of a list (plain Python, exact) gives numpy's default (linear) percentiles, in ms, and the max;
    `percentile` reads the sorted list as numpy does."""
    values = [random.Random(n).expovariate(50.0) for _ in range(n)]
    got = percentiles_ms(values)
    want = np.percentile(np.asarray(values) * 1000.0, [50, 95, 99])
    assert [got["p50"], got["p95"], got["p99"]] == pytest.approx([round(float(v), 4) for v in want], abs=1e-4)
    assert got["max"] == pytest.approx(max(values) * 1000.0, abs=1e-4)
    assert percentile(sorted(values), 95) == pytest.approx(float(np.percentile(values, 95)), rel=1e-12)

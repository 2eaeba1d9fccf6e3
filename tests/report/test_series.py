"""The data behind the timeline and stage pictures: pure functions of heartbeat lines (made up here, in the users'
format), with the fields other work adds used when present and tolerated when absent."""

from __future__ import annotations

import pytest

from fwe_cli.report.series import (estimated_step_ms, fetch_lines, group_by_process, order_stages, stage_split,
                                   stage_totals, timeline)
from tests.report.support import job_lines


def test_timeline_points_step_time_and_warmup_boundary():
    """One point per fineweb_fetch line (step, wait in ms); the warmup line gives the boundary after the `filled`
    steps served from batches queued before step 1; the step time comes from the plan when given."""
    series = timeline(job_lines(0, 100, warmup=(4, 3)), "run", plan_step_ms=100.0)
    assert series.steps == tuple(range(1, 101))
    assert series.wait_ms[49] == pytest.approx(250.0) and series.wait_ms[0] == pytest.approx(0.2)
    assert (series.warmup.requested, series.warmup.filled, series.warmup.wait_ms) == (4, 3, 120.0)
    assert series.warmup.boundary == 3.5
    assert (series.step_ms, series.step_source) == (100.0, "plan")
    assert series.first_batch_s == 0.5
    assert series.queue_fill[48:51] == (3, 0, 3)
    assert series.parts is None


def test_step_time_estimated_from_timestamps_and_none_with_step_ms_0():
    """A training job's step is the median gap between heartbeat lines less the next wait (each line is written
    when its fetch returns); a measured run with --step-ms 0 ran the loader alone: no step line."""
    lines = job_lines(0, 60, step_s=0.08)
    job = timeline(lines, "rank 0")
    assert job.step_source == "timestamps" and job.step_ms == pytest.approx(80.0, abs=0.01)
    assert estimated_step_ms(fetch_lines(lines)) == pytest.approx(80.0, abs=0.01)
    alone = timeline(lines, "run", plan_step_ms=0.0)
    assert alone.step_ms is None and alone.step_source is None


def test_stall_fraction_counts_the_steps_after_the_first_batch():
    """Time waiting = waits of steps 2..100 over the wall time from the start of step 2's fetch to the end of step
    100's: 98 steps of 100 ms compute between them, and every wait (250 ms at steps 50 and 100, 0.2 ms else)."""
    series = timeline(job_lines(0, 100, step_s=0.1, slow_every=50), "rank 0")
    waits = 2 * 0.25 + 97 * 0.0002
    wall = 98 * 0.1 + waits
    assert series.stall_fraction == pytest.approx(waits / wall, rel=1e-3)
    assert series.steady_wait_ms[0] == series.wait_ms[1]


def test_absent_new_fields_give_none_not_errors():
    """Lines without queue_fill, wait_s_by_stage or part (today's loader): no queue series, no stage split, no parts;
    no warmup line: no boundary."""
    lines = job_lines(0, 20, extras=False, warmup=None)
    series = timeline(lines, "rank 0")
    assert series.queue_fill is None and series.parts is None and series.warmup is None
    assert stage_split(lines, "rank 0") is None
    assert stage_totals([("rank 0", {})]) is None


def test_head_and_tail_parts_break_the_series():
    """A run logged as head and tail keeps its step numbers; the estimate and the stage bins never span the gap."""
    lines = job_lines(0, 40, part_at=21, slow_every=1000)
    series = timeline(lines, "rank 0")
    assert series.parts[:20] == ("head",) * 20 and series.parts[20:] == ("tail",) * 20
    assert series.steps[19:21] == (20, 1021)
    assert series.step_ms == pytest.approx(100.0, abs=0.01)  # the 1000-step gap is not one long step
    split = stage_split(lines, "rank 0", bins=4)
    assert all(first <= last and not (first <= 20 < 1021 <= last) for first, last in split.bins)


def test_stage_split_orders_known_stages_and_bins_steps():
    """Stages in pipeline order (open … queue_put), unknown ones after by name; more steps than bins are summed into
    bins of consecutive steps; the totals add up every line's wait_s_by_stage."""
    assert order_stages(["queue_put", "zeta", "tokenize", "open", "alpha"]) == (
        "open", "tokenize", "queue_put", "alpha", "zeta")
    lines = job_lines(0, 100, slow_every=50)
    split = stage_split(lines, "rank 0", bins=10)
    assert split.stages == ("source_read", "tokenize", "queue_put")
    assert len(split.bins) == 10 and split.bins[0] == (1, 10) and split.bins[-1] == (91, 100)
    assert split.seconds[0][4] == pytest.approx(0.2) and split.seconds[0][0] == 0.0  # step 50 is in bin 5
    assert split.totals["source_read"] == pytest.approx(0.4) and split.totals["queue_put"] == pytest.approx(98 * 2e-4)
    one_per_step = stage_split(lines[:12], "rank 0", bins=60)
    assert all(first == last for first, last in one_per_step.bins)


def test_stage_totals_one_row_per_series():
    """Totals per run or rank, stages in one order for all, 0 where a series lacks one."""
    totals = stage_totals([("run00-cold", {"tokenizer_load": 0.3, "open": 0.1}), ("run01-warm", {"tokenize": 0.05}),
                           ("run02-warm", {})])
    assert totals.labels == ("run00-cold", "run01-warm")
    assert totals.stages == ("open", "tokenizer_load", "tokenize")
    assert totals.seconds == ((0.1, 0.3, 0.0), (0.0, 0.0, 0.05))


def test_processes_grouped_by_rank_and_pid():
    """A job restarted into the same file (steps from 1 again) is two series: 'rank R pid P' each; one process per
    rank is just 'rank R'."""
    lines = job_lines(0, 5, pid=1) + job_lines(0, 5, pid=2) + job_lines(1, 5, pid=3)
    groups = group_by_process(lines)
    assert [label for label, _ in groups] == ["rank 0 pid 1", "rank 0 pid 2", "rank 1"]
    assert [len(fetch_lines(group)) for _, group in groups] == [5, 5, 5]

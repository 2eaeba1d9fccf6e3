"""How a split tokenize divides its input: spans of whole files that depend on the listing alone, each task a
contiguous run of them balanced by bytes, and which task a run is (flags > SLURM array > torchrun > one task)."""

from __future__ import annotations

import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader.files.formats import FilePosition
from fwe_cli.loader.sources.order import Cursor, Window
from fwe_cli.tokens.run import tokenize_config
from fwe_cli.tokens.split import SpanPlan, TaskSplit, file_spans, resolve_split, task_spans, task_threads


def test_spans_cover_every_file_once_in_order_and_close_at_the_limit():
    """Spans are consecutive whole files, closed once they hold the limit (a big file alone), covering the listing
    once in order; the last may hold less."""
    sizes = [30, 30, 50, 500, 10, 10, 10, 90, 5]
    spans = file_spans(sizes, 100)
    assert spans == [(0, 3), (3, 4), (4, 8), (8, 9)]
    assert file_spans([], 100) == []
    assert file_spans([1, 2], 100) == [(0, 2)]


@pytest.mark.parametrize("tasks", [1, 2, 3, 5, 8, 40])
def test_tasks_take_contiguous_disjoint_runs_of_spans_that_cover_all(tasks):
    """Task 0, 1, ... take consecutive ranges of spans, together every span once, in order (so their shards, task
    after task, are a single run's); with more tasks than spans some take none."""
    sizes = [7, 300, 12, 12, 80, 5, 5, 5, 140, 64, 1, 90, 33, 33, 250, 2]
    spans = file_spans(sizes, 100)
    ranges = [task_spans(spans, sizes, TaskSplit(task, tasks)) for task in range(tasks)]
    assert ranges[0][0] == 0 and ranges[-1][1] == len(spans)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(first <= end for first, end in ranges)


def test_tasks_are_balanced_by_bytes():
    """Equal spans are dealt out evenly: 12 spans of one file each over 4 tasks give 3 each."""
    sizes = [100] * 12
    spans = file_spans(sizes, 100)
    assert [task_spans(spans, sizes, TaskSplit(t, 4)) for t in range(4)] == [(0, 3), (3, 6), (6, 9), (9, 12)]


def test_the_plan_records_the_split_and_counts_progress_in_the_tasks_bytes():
    """A task's plan records what a resume and the merge compare, and its progress counts its own files' bytes: the
    files of its spans before the document, plus the offset into a JSONL file."""
    files = [{"path": f"/d/{i}.jsonl", "bytes": 20_000} for i in range(6)]
    plan = SpanPlan.of(files, 1_000, TaskSplit(1, 3, "flags"))
    assert plan.spans == ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)) and (plan.first, plan.end) == (2, 4)
    assert plan.record(TaskSplit(1, 3, "flags")) == {"task": 1, "tasks": 3, "origin": "flags", "span_bytes": 16_000,
                                                      "span_count": 6, "spans": [2, 4]}
    assert plan.task_bytes == 40_000
    assert plan.done_bytes(2, None) == 0
    after = FilePosition(plan.spans[3][0], 40, 3)  # 40 bytes into span 3's first file: a document's end there
    assert plan.done_bytes(3, Cursor(0, 0, Window(0, None, 1, 0, after), 0)) == 20_040


@pytest.mark.parametrize("env, flags, want", [
    ({}, (None, None), TaskSplit(0, 1, "default")),
    ({"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "5"}, (None, None),
     TaskSplit(2, 4, "slurm-array")),
    ({"RANK": "3", "WORLD_SIZE": "8"}, (None, None), TaskSplit(3, 8, "torchrun")),
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "RANK": "3", "WORLD_SIZE": "8"}, (None, None),
     TaskSplit(1, 2, "slurm-array")),
    ({"SLURM_PROCID": "2", "SLURM_NTASKS": "4"}, (None, None), TaskSplit(0, 1, "default")),  # srun: pass the flags
    ({"RANK": "3", "WORLD_SIZE": "8"}, (5, 6), TaskSplit(5, 6, "flags")),
])
def test_which_task_flags_then_slurm_array_then_torchrun_then_one(env, flags, want):
    """--task/--tasks win, then a SLURM array's task (ID minus MIN, of COUNT), then torchrun's RANK/WORLD_SIZE;
    srun's per-step SLURM_PROCID alone splits nothing (a batch script that is not an array would run 1/N of it)."""
    assert resolve_split(*flags, env) == want


@pytest.mark.parametrize("env, flags, needle", [
    ({}, (1, None), "--task and --tasks go together"),
    ({}, (3, 3), "--task must be an integer from 0 to 2"),
    ({}, (0, 0), "--tasks must be an integer from 1"),
    ({"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_COUNT": "4"}, (None, None), "give --task/--tasks instead"),
    ({"RANK": "2"}, (None, None), "needs both RANK and WORLD_SIZE"),
])
def test_a_bad_split_is_one_line_naming_the_flag_or_variable(env, flags, needle):
    """A split that is not one task of N is refused naming what the user set."""
    with pytest.raises(ConfigError, match=needle):
        resolve_split(*flags, env)


def test_torchrun_tasks_of_one_node_share_its_cores(monkeypatch):
    """Under torchrun, LOCAL_WORLD_SIZE tasks run on each node: each encodes on its share of the cores (the flag
    still wins); elsewhere a task takes every core."""
    import fwe_cli.hostinfo as hostinfo

    torchrun = {"RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}
    monkeypatch.setattr(hostinfo, "usable_cores", lambda: 16)
    assert task_threads(resolve_split(None, None, torchrun), torchrun) == 4
    assert task_threads(TaskSplit(1, 8, "flags"), torchrun) is None
    monkeypatch.setattr(hostinfo, "usable_cores", lambda: 2)
    assert task_threads(resolve_split(None, None, torchrun), torchrun) == 1
    config = tokenize_config("src", "out", "byte", threads=3, env=torchrun)
    assert config.threads == 3 and config.split == TaskSplit(1, 8, "torchrun")
    assert config.split.out("/o") == "/o/tasks/00001-of-00008" and TaskSplit().out("/o") == "/o"

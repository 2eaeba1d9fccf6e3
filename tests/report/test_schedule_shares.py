"""The data behind `fwe report`'s schedule picture and table: each stage's planned against its delivered shares, summed
over a measure's runs or a job's processes (each at its last `fineweb_mix` line), the weights in force as a line
over the steps, and each process's delivered share between two of its lines; nothing for a mix without a schedule.
Pure functions of made-up artifacts and lines shaped as fwe writes them; then the same from a real scheduled run,
through `fwe report` (its pictures and report.md)."""

from __future__ import annotations

import orjson
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.report.schedule_shares import artifact_schedule, heartbeat_schedule
from tests.helpers import invoke, write_jsonl
from tests.report.support import png_size


def stages(a: tuple, b: tuple) -> list[list[dict]]:
    """Two sources' `stages`, from (planned, tokens) per stage: stage 1 constant 3:1 to step 10, stage 2 a ramp to
    1:1 to step 30, then held."""
    shapes = [((0, 10), (0.75, 0.75), (0.25, 0.25)), ((10, 30), (0.75, 0.5), (0.25, 0.5)),
              ((30, None), (0.5, 0.5), (0.5, 0.5))]
    return [[{"stage": k + 1, "steps": list(steps), "weights": list(ws[i]), "planned": got[0], "tokens": got[1]}
             for k, ((steps, *ws), got) in enumerate(zip(shapes, figures))] for i, figures in enumerate((a, b))]


def entries(a: tuple, b: tuple) -> list[dict]:
    sa, sb = stages(a, b)
    return [{"source": "web", "id": "edu", "weight": 0.6, "documents": 9, "tokens": 1, "stages": sa},
            {"source": "mine.jsonl", "id": "edu4", "weight": 0.4, "documents": 9, "tokens": 1, "stages": sb}]


def test_a_measures_runs_are_summed_stage_by_stage():
    """Two runs' stages add up: each stage's planned and delivered shares are of the sums, the weights in force run
    as a line through each stage's start and end (a ramp from the stage before's), an open stage reaches as far as
    its tokens do; a mix without stages has no schedule to show."""
    runs = [{"sources": entries(((300, 310), (200, 194), (0, 0)), ((100, 90), (200, 206), (0, 0)))},
            {"sources": entries(((300, 298), (100, 100), (500, 520)), ((100, 102), (100, 100), (500, 480)))}]
    record = {"config": {"batch_size": 2, "seq_len": 10}, "runs": runs}
    schedule = artifact_schedule("measure", record)
    assert schedule.sources == ("edu", "edu4") and schedule.over == "2 runs"
    first, second, held = schedule.rows
    assert (first.planned, first.tokens) == ((0.75, 0.25), 800) and first.delivered == pytest.approx((0.76, 0.24))
    assert second.planned == (0.5, 0.5) and second.delivered == pytest.approx((0.49, 0.51))
    assert held.delivered == pytest.approx((0.52, 0.48)) and schedule.largest_gap == (pytest.approx(0.02), held)
    assert schedule.gap_text() == "2.00 points, in stage 3 (1,000 tokens)"
    assert schedule.planned == ((0, (0.75, 0.25)), (10, (0.75, 0.25)), (10, (0.75, 0.25)), (30, (0.5, 0.5)),
                                (30, (0.5, 0.5)), (55, (0.5, 0.5)))  # (1000 tokens at 2 runs x 20 a step: 25)
    assert [span[:2] for span in schedule.delivered] == [(0, 10), (10, 30), (30, 55)]
    assert artifact_schedule("smoke", {"loader": {"sources": [{"source": "x", "weight": 1.0}]}}) is None


def test_a_jobs_lines_give_its_delivered_share_between_lines_and_its_stages():
    """Two processes' fineweb_mix lines: each interval between a process's lines is a delivered share over the
    steps the lines were read at; the stages are the sum of each process's last line; lines without a schedule (a
    mix without one) give nothing."""
    def line(pid: int, step: int, tokens: tuple, figures: tuple) -> dict:
        sources = entries(*figures)
        for entry, count in zip(sources, tokens):
            entry["tokens"] = count
        return {"pid": pid, "rank": pid, "step": step, "msg": "fineweb_mix", "sources": sources,
                "schedule": {"step": step + 3, "stage": 1, "weights": [0.75, 0.25]}}

    quiet = ((0, 0), (0, 0), (0, 0))
    lines = [line(0, 100, (300, 100), (quiet, quiet)), line(0, 200, (600, 200), (((9, 600), (0, 0), (0, 0)),
                                                                                   ((3, 200), (0, 0), (0, 0)))),
             line(1, 100, (200, 200), (quiet, quiet)), line(1, 200, (500, 300), (((9, 500), (0, 0), (0, 0)),
                                                                                   ((3, 300), (0, 0), (0, 0))))]
    schedule = heartbeat_schedule(lines)
    assert schedule.delivered == ((103, 203, (0.75, 0.25)), (103, 203, (0.75, 0.25)))
    assert schedule.rows[0].delivered == (1100 / 1600, 500 / 1600) and schedule.rows[0].planned == (0.75, 0.25)
    assert schedule.over == "2 processes as of each one’s last fineweb_mix line"
    assert heartbeat_schedule([dict(lines[0], schedule=None)]) is None


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory) -> dict:
    """A schedule of a synthetic source and a JSONL one (stage 1: all synthetic to step 100; a ramp to 1:1 at step
    250), smoked for 300 batches and read by a job of two ranks for 300 batches each with their heartbeats."""
    root = tmp_path_factory.mktemp("schedule_report")
    mine = write_jsonl(root / "mine.jsonl", [{"id": f"m{i}", "text": f"my document {i}. " * 30} for i in range(3000)])
    mix = root / "mix.json"
    mix.write_bytes(orjson.dumps({
        "sources": [{"id": "web", "source": "synthetic", "seed": 1}, {"id": "mine", "local_path": str(mine),
                                                                      "stop": "cycle"}],
        "schedule": [{"until_step": 100, "weights": {"web": 1}},
                     {"until_step": 250, "weights": {"web": 1, "mine": 1}, "ramp": "linear"}]}))
    smoke = invoke("smoke", "--mix", str(mix), "--tokenizer", "byte", "--seq-len", "256", "--batch", "4", "--batches",
                   "300", "--json", "--artifacts-dir", str(root / "art"))
    assert smoke.exit_code == 0, smoke.stderr
    for rank in range(2):
        config = resolve_config(env={}, mix=str(mix), tokenizer="byte", seq_len=256, batch_size=4, shard_mod=2,
                                shard_rem=rank, rank=rank, heartbeat_dir=str(root / "job"))
        with FineWebLoader(config) as loader:
            for _ in range(300):
                loader.next_batch()
    return {"smoke": orjson.loads(smoke.stdout)["artifact"], "job": str(root / "job")}


def test_a_scheduled_runs_report_draws_and_tables_each_stage(tmp_path, scheduled):
    """`fwe report` of the smoke artifact and the job's heartbeats: a schedule picture each at its planned size, and
    in report.md a table per input of each stage's steps and each source's planned → delivered share, the stages
    those the run went through (all synthetic, then the ramp, then held)."""
    out = tmp_path / "report"
    result = invoke("report", scheduled["smoke"], scheduled["job"], "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    for name in ("1-smoke-schedule.png", "2-heartbeats-schedule.png"):
        assert png_size(out / name) == (1100, 520), name
    markdown = (out / "report.md").read_text()
    assert markdown.count("**Schedule of 3 stages**") == 2
    assert "| 1 | 0 – 100 |" in markdown and "| 2 | 100 – 250 |" in markdown and "| 3 | 250 – end |" in markdown
    assert "100.00 % → 100.00 % | 0.00 % → 0.00 % |" in markdown

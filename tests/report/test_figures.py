"""The data behind the artifact pictures (phase waterfall, tune heat map, regression deltas) and which pictures each
input gets: pure functions of made-up artifacts shaped as fwe writes them."""

from __future__ import annotations

import pytest

from fwe_cli.report.figures import (REACH_FLOORS, cell_shade, cell_text, format_metric, phase_waterfall,
                                    regression_deltas, tune_heatmaps)
from fwe_cli.report.inputs import HeartbeatFile, Input
from fwe_cli.report.plan import plan_sections
from tests.report.support import job_lines, ranked_summary

PHASES = {"interpreter_start": 0.05, "imports": 0.2, "tokenizer_ready": 0.01, "source_opened": 0.3,
          "first_document": 0.04, "first_batch": 0.02, "warmup_filled": 0.0}


def measure_summary(step_ms: float = 100.0, regression: dict | None = None) -> dict:
    runs = [{"kind": "cold", "run_dir": "art/measure/X/run00-cold", "heartbeat": "art/measure/X/run00-cold/hb",
             "first_batch_s": 0.62, "phases": PHASES, "stall_by_stage_s": {"source_read": 0.3, "open": 0.1}},
            {"kind": "warm", "run_dir": "art/measure/X/run01-warm", "heartbeat": "art/measure/X/run01-warm/hb",
             "first_batch_s": 0.31, "phases": dict(PHASES, source_opened=0.0, imports=0.19)},
            {"kind": "warm", "run_dir": "art/measure/X/run02-warm", "phases": None, "error": {"message": "boom"}}]
    return {"runs": runs, "verdict": {"pass": True, "checks": []}, "plan": {"step_ms": step_ms},
            "regression": regression}


def tune_summary(threads=(2, 4), recommended=(64, 4, 4)) -> dict:
    settings = []
    for t in threads:
        for d in (16, 64):
            for q in (1, 4, 8):
                status = "failed" if (d, q, t) == (16, 8, 2) else "ok"
                median = None if status == "failed" else round(0.5 / (d * q * (t or 1)), 6)
                settings.append({"setting": {"doc_batch": d, "queue_depth": q, "tokenizer_threads": t},
                                 "median": median, "values": [] if median is None else [median],
                                 "status": status, "feasible": q > 1, "tied_with_best": (d, q) == (64, 8)})
    d, q, t = recommended
    plan = {"doc_batches": [16, 64], "queue_depths": [1, 4, 8], "threads": list(threads)}
    return {"settings": settings, "plan": plan,
            "objective": {"name": "stall", "metric": "stall_fraction", "direction": "min", "label": "stall fraction"},
            "recommendation": {"setting": {"doc_batch": d, "queue_depth": q, "tokenizer_threads": t},
                               "label": f"doc_batch={d} Q={q} threads={t}",
                               "best": {"doc_batch": 64, "queue_depth": 8, "tokenizer_threads": threads[-1]}}}


def shades(heatmap) -> list[list[float | None]]:
    return [[cell_shade(heatmap, r, c) for c in range(len(heatmap.queue_depths))]
            for r in range(len(heatmap.doc_batches))]


REGRESSION = {"baseline": "base.json", "max_regression_pct": 10.0, "pass": False, "notes": ["fetch_p95_ms: skipped"],
              "checks": [{"metric": "first_batch_s", "baseline": 0.2, "current": 0.5, "delta_pct": 150.0,
                          "bound_pct": 10.0, "worse_is": "higher", "pass": False, "note": "worse by 150.0 % > 10 %"},
                         {"metric": "tokens_per_s", "baseline": 1e6, "current": 0.8e6, "delta_pct": -20.0,
                          "bound_pct": 10.0, "worse_is": "lower", "pass": False, "note": "worse by 20.0 % > 10 %"},
                         {"metric": "fetch_p95_ms", "baseline": 0.0, "current": 0.3, "delta_pct": None,
                          "bound_pct": 10.0, "pass": True, "note": "under the floor"}]}


def test_waterfall_segments_follow_the_phase_order_and_add_up():
    """Each run with phases is one row of consecutive segments in the loader's phase order, each starting where the
    previous ended, ending at first_batch_s; a run without phases (failed) has no row."""
    waterfall = phase_waterfall(measure_summary())
    assert [row.label for row in waterfall.rows] == ["run00-cold", "run01-warm"]
    cold = waterfall.rows[0]
    assert [phase for phase, _, _ in cold.segments] == list(PHASES)
    assert cold.segments[3] == ("source_opened", pytest.approx(0.26), 0.3)
    for (_, start, duration), (_, following, _) in zip(cold.segments, cold.segments[1:]):
        assert following == pytest.approx(start + duration)
    assert cold.total_s == pytest.approx(0.62)
    assert waterfall.phases == tuple(PHASES)
    assert phase_waterfall({"runs": [{"kind": "cold", "phases": None}]}) is None


def test_heatmap_per_thread_count_with_the_recommendation_marked():
    """One doc batch x Q matrix per tokenizer-thread count; the objective's median per cell, None where the setting
    failed; the recommended setting's cell marked on its own thread count's map only."""
    maps = tune_heatmaps(tune_summary())
    assert [m.threads for m in maps] == [2, 4]
    two, four = maps
    assert two.doc_batches == (16, 64) and two.queue_depths == (1, 4, 8)
    assert two.values[0][2] is None and two.status[0][2] == "failed"
    assert two.values[1][1] == round(0.5 / (64 * 4 * 2), 6)
    assert four.marked == (1, 1) and two.marked is None
    assert two.reach == four.reach == REACH_FLOORS * 1.0 and two.unit == "points"  # one colour scale
    assert (two.direction, two.label, two.metric) == ("min", "stall fraction", "stall_fraction")
    assert cell_text(two, 0, 2) == "failed"
    assert cell_text(two, 0, 0).endswith("!p95")  # Q=1 is not feasible here
    assert cell_text(four, 1, 2).startswith("≈ ")  # tied with the best, not the pick


def test_heatmap_without_a_thread_sweep_and_without_a_recommendation():
    """threads None (not swept): one map; a sweep where nothing ran ok has no marked cell."""
    summary = tune_summary(threads=(None,), recommended=(64, 4, None))
    summary["plan"]["threads"] = None
    for entry in summary["settings"]:
        del entry["setting"]["tokenizer_threads"]
    summary["recommendation"]["setting"].pop("tokenizer_threads")
    (only,) = tune_heatmaps(summary)
    assert only.threads is None and only.marked == (1, 1)
    summary["recommendation"] = None
    assert tune_heatmaps(summary)[0].marked is None


def test_a_spread_within_noise_is_one_colour_on_a_scale_of_points():
    """The defect of a 0.216-0.228 % stall spread painted from deep red to deep green: every setting `fwe tune`
    counts within noise of the best (its table marks them ≈) is one colour (shade 0), and the scale reaches
    REACH_FLOORS noise floors (10 stall points), so even the 0.012-point spread itself is about a thousandth of it."""
    summary = ranked_summary({(16, 1): [0.00228, 0.00231, 0.00226], (16, 4): [0.00221, 0.00219, 0.00225],
                              (64, 1): [0.00216, 0.00214, 0.00219], (64, 4): [0.00224, 0.00220, 0.00227]})
    assert all(entry["tied_with_best"] for entry in summary["settings"])
    (heatmap,) = tune_heatmaps(summary)
    assert shades(heatmap) == [[0.0, 0.0], [0.0, 0.0]]
    assert (heatmap.unit, heatmap.floor, heatmap.reach) == ("points", 1.0, 10.0)
    spread = max(map(max, heatmap.shortfall)) - min(map(min, heatmap.shortfall))
    assert spread / heatmap.reach == pytest.approx(0.0012)


def test_settings_beyond_noise_shade_by_how_much_worse_they_are():
    """Stall: the best (2 %) and a setting 0.4 points off share the noise colour; settings 3 and 38 points worse sit
    at 3/38 and the far end (the scale reaches the largest shortfall when it exceeds 10 floors); without the 38,
    3 points is 0.3 of a 10-point scale. Every cell marked ≈ is the noise colour, and one that misses the fetch p95
    target but whose stall is within noise of the best is too (its colour is about stall; !p95 says the rest)."""
    values = {(16, 1): [0.40, 0.39, 0.41], (16, 4): [0.05, 0.051, 0.049],
              (64, 1): [0.024, 0.023, 0.025], (64, 4): [0.02, 0.019, 0.021]}
    (heatmap,) = tune_heatmaps(ranked_summary(values, p95_ms={(64, 1): 500.0}))
    assert heatmap.reach == pytest.approx(38.0)
    assert shades(heatmap) == [[1.0, pytest.approx(3 / 38)], [0.0, 0.0]]
    assert not heatmap.tied[1][0] and heatmap.noise[1][0] and cell_text(heatmap, 1, 0).endswith("!p95")
    values[(16, 1)] = [0.031, 0.032, 0.030]  # 1.1 points worse, ranges apart: just beyond noise
    (heatmap,) = tune_heatmaps(ranked_summary(values))
    assert heatmap.reach == 10.0 and shades(heatmap) == [[pytest.approx(0.11), pytest.approx(0.3)], [0.0, 0.0]]


def test_tokens_per_s_shortfall_is_a_percentage_of_the_best():
    """tokens/s: the unit is % of the best (the floor 2 %), so a setting 10 % slower with ranges apart sits half-way
    up a 20 % scale; one 1 % slower is within noise."""
    (heatmap,) = tune_heatmaps(ranked_summary({(16, 4): [1.0e6, 1.01e6, 0.99e6], (64, 4): [0.9e6, 0.91e6, 0.89e6],
                                               (32, 4): [0.99e6, 0.995e6, 0.985e6]}, objective="tokens_per_s"))
    assert (heatmap.unit, heatmap.floor, heatmap.reach) == ("%", 2.0, 20.0)
    assert shades(heatmap) == [[0.0], [0.0], [pytest.approx(0.5)]]


def test_regression_deltas_point_worse_to_the_right():
    """'Worse by %' per check: a first batch up 150 % is +150, tokens/s down 20 % is +20 (worse), a baseline of 0
    is None; bound, verdict and notes carried; no record, no deltas."""
    deltas = regression_deltas(REGRESSION)
    assert [bar.worse_pct for bar in deltas.bars] == [150.0, 20.0, None]
    assert [bar.passed for bar in deltas.bars] == [False, False, True]
    assert deltas.bars[0].bound_pct == 10.0 and deltas.baseline == "base.json" and deltas.passed is False
    assert deltas.notes == ("fetch_p95_ms: skipped",)
    assert regression_deltas(None) is None
    assert format_metric("first_batch_s", 0.5) == "500.0 ms"
    assert format_metric("tokens_per_s", 8e5) == "800,000 tokens/s"


def test_each_input_gets_its_pictures_named_by_place_and_kind():
    """A measure summary: waterfall, a timeline per run with a heartbeat, stages, regression; a tune summary: a heat
    map per thread count; a smoke artifact: its regression; heartbeats: one overlaid timeline and the stages. File
    names start with the input's number, so two inputs of one kind never collide."""
    beat = HeartbeatFile("hb", tuple(job_lines(0, 30)), 0)
    inputs = [Input("m.json", "measure", measure_summary(regression=REGRESSION), (beat, None, None)),
              Input("t.json", "tune", tune_summary(), ()),
              Input("s.json", "smoke", {"regression": REGRESSION}, ()),
              Input("logs", "heartbeats", None, (beat, HeartbeatFile("hb1", tuple(job_lines(1, 30, pid=7)), 0)))]
    files = [[p.file for p in section.pictures] for section in plan_sections(inputs)]
    assert files == [
        ["1-measure-waterfall.png", "1-measure-run00-cold-timeline.png", "1-measure-stages.png",
         "1-measure-regression.png"],
        ["2-tune-heatmap-threads2.png", "2-tune-heatmap-threads4.png"],
        ["3-smoke-regression.png"],
        ["4-heartbeats-timeline.png", "4-heartbeats-stages.png"]]
    measure, _, _, job = plan_sections(inputs)
    timeline = measure.pictures[1].data
    assert timeline.timelines[0].step_ms == 100.0 and timeline.stages is not None  # one run: its stage panel
    assert measure.pictures[2].data.labels == ("run00-cold",)  # the run's own stall_by_stage_s wins
    assert measure.pictures[2].data.stages == ("open", "source_read")
    assert len(job.pictures[0].data.timelines) == 2 and job.pictures[0].data.stages is None  # overlaid: no panel
    assert job.pictures[1].data.labels == ("rank 0", "rank 1")

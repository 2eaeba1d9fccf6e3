"""Which pictures each input gets, with their data, file names and sizes (pure: nothing is read or drawn here).

A measure summary: the phase waterfall, each run's timeline, the stage split of the waits, the regression deltas
when gated. A tune summary: one heat map per tokenizer-thread count. A smoke artifact: the regression deltas, the
stage split. Heartbeat files: one timeline with every rank (process) overlaid, and the stage split per rank. Any of
them read from a mix of sources: each source's realized share against its weight (mix_shares), and for a schedule
its planned against its delivered weights over the steps (schedule_shares); any that counts its rows' crops: the
share of the tokens read that reached a row, by packing (row_fill).
Files are named `<input number>-<kind>-<what>.png`, so several inputs of one kind never collide."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwe_cli.report.figures import phase_waterfall, regression_deltas, run_label, tune_heatmaps
from fwe_cli.report.inputs import Input
from fwe_cli.report.mix_shares import MixShares, artifact_mix, heartbeat_mix
from fwe_cli.report.row_fill import RowFill, artifact_fill, heartbeat_fill
from fwe_cli.report.schedule_shares import ScheduleShares, artifact_schedule, heartbeat_schedule
from fwe_cli.report.series import StageSplit, Timeline, group_by_process, stage_split, stage_totals, timeline

DPI = 100  # sizes are in pixels; a figure is size / DPI inches
PLANNED_TITLE = "{} — the schedule's planned and delivered weights over the steps"
MAX_HEIGHT = 1600


@dataclass(frozen=True)
class TimelineData:
    """A timeline picture: one series (a measure run) or several overlaid (a job's ranks); the per-step stage
    panel only for a single series that carries the split."""

    timelines: tuple[Timeline, ...]
    stages: StageSplit | None


@dataclass(frozen=True)
class Picture:
    file: str
    """File name inside the output folder."""
    kind: str
    """waterfall | timeline | stages | heatmap | deltas | mix | fill | schedule"""
    title: str
    data: object
    size_px: tuple[int, int]
    """(width, height) of the PNG."""


@dataclass(frozen=True)
class Section:
    """One input's part of the report: the input, its timelines, mix, schedule and row fill (for the Markdown's
    figures), its pictures."""

    number: int
    input: Input
    timelines: tuple[Timeline, ...]
    pictures: tuple[Picture, ...]
    mix: MixShares | None = None
    fill: RowFill | None = None
    schedule: ScheduleShares | None = None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


def timeline_size(data: TimelineData) -> tuple[int, int]:
    height = 400 + (200 if any(t.queue_fill for t in data.timelines) else 0) + (260 if data.stages else 0)
    return 1100, height


def _rows_height(base: int, per_row: int, rows: int) -> int:
    return min(MAX_HEIGHT, base + per_row * rows)


def _timeline_picture(file: str, title: str, timelines: list[Timeline], stages: StageSplit | None) -> Picture:
    data = TimelineData(tuple(timelines), stages if len(timelines) == 1 else None)
    return Picture(file, "timeline", title, data, timeline_size(data))


def _stages_picture(file: str, title: str, named: list[tuple[str, dict]]) -> list[Picture]:
    totals = stage_totals(named)
    if totals is None:
        return []
    return [Picture(file, "stages", title, totals, (1000, _rows_height(200, 40, len(totals.labels))))]


def _deltas_picture(file: str, title: str, record: dict) -> list[Picture]:
    deltas = regression_deltas(record.get("regression"))
    if deltas is None or not deltas.bars:
        return []
    return [Picture(file, "deltas", title, deltas, (1000, _rows_height(220, 70, len(deltas.bars))))]


def _mix_picture(file: str, title: str, mix: MixShares | None) -> list[Picture]:
    if mix is None:
        return []
    return [Picture(file, "mix", title, mix, (1000, _rows_height(230, 75, len(mix.sources))))]


def _schedule_picture(file: str, title: str, schedule: ScheduleShares | None) -> list[Picture]:
    return [] if schedule is None else [Picture(file, "schedule", title, schedule, (1100, 520))]


def _fill_picture(file: str, title: str, fill: RowFill | None) -> list[Picture]:
    if fill is None:
        return []
    return [Picture(file, "fill", title, fill, (1000, _rows_height(200, 45, len(fill.rows))))]


def _measure(n: int, inp: Input) -> Section:
    record, pictures, timelines, named = inp.record or {}, [], [], []
    waterfall = phase_waterfall(record)
    if waterfall is not None:
        pictures.append(Picture(f"{n}-measure-waterfall.png", "waterfall", "fwe measure — first batch by phase",
                                waterfall, (1000, _rows_height(200, 55, len(waterfall.rows)))))
    step_ms = float((record.get("plan") or {}).get("step_ms") or 0.0)
    for index, (run, beat) in enumerate(zip(record.get("runs") or [], inp.heartbeats)):
        label = run_label(run, index)
        split = None
        if beat is not None:
            series = timeline(beat.lines, label, plan_step_ms=step_ms)
            split = stage_split(beat.lines, label)
            if series.steps:
                timelines.append(series)
                pictures.append(_timeline_picture(f"{n}-measure-{_slug(label)}-timeline.png",
                                                  f"fwe measure {label} — fetch wait per step", [series], split))
        by_stage = run.get("stall_by_stage_s") or (run.get("loader") or {}).get("stall_by_stage_s")
        named.append((label, by_stage if isinstance(by_stage, dict) else split.totals if split else {}))
    pictures += _stages_picture(f"{n}-measure-stages.png", "fwe measure — waits by producer stage", named)
    pictures += _deltas_picture(f"{n}-measure-regression.png", "fwe measure — regression gate", record)
    mix = artifact_mix("measure", record)
    pictures += _mix_picture(f"{n}-measure-mix.png", "fwe measure — each source's share against its weight", mix)
    schedule = artifact_schedule("measure", record)
    pictures += _schedule_picture(f"{n}-measure-schedule.png", PLANNED_TITLE.format("fwe measure"), schedule)
    fill = artifact_fill("measure", record, [run_label(run, i) for i, run in enumerate(record.get("runs") or [])])
    pictures += _fill_picture(f"{n}-measure-fill.png", "fwe measure — tokens read into rows and cropped", fill)
    return Section(n, inp, tuple(timelines), tuple(pictures), mix, fill, schedule)


def _tune(n: int, inp: Input) -> Section:
    pictures = []
    for heatmap in tune_heatmaps(inp.record or {}):
        suffix = "" if heatmap.threads is None else f"-threads{heatmap.threads}"
        title = f"fwe tune — median {heatmap.label}" + ("" if heatmap.threads is None
                                                         else f", tokenizer threads {heatmap.threads}")
        size = (max(700, 340 + 120 * len(heatmap.queue_depths)), max(420, 220 + 70 * len(heatmap.doc_batches)))
        pictures.append(Picture(f"{n}-tune-heatmap{suffix}.png", "heatmap", title, heatmap, size))
    mix = artifact_mix("tune", inp.record or {})
    pictures += _mix_picture(f"{n}-tune-mix.png", "fwe tune — each source's share against its weight", mix)
    schedule = artifact_schedule("tune", inp.record or {})
    pictures += _schedule_picture(f"{n}-tune-schedule.png", PLANNED_TITLE.format("fwe tune"), schedule)
    fill = artifact_fill("tune", inp.record or {})
    pictures += _fill_picture(f"{n}-tune-fill.png", "fwe tune — tokens read into rows and cropped", fill)
    return Section(n, inp, (), tuple(pictures), mix, fill, schedule)


def _smoke(n: int, inp: Input) -> Section:
    record = inp.record or {}
    by_stage = (record.get("loader") or {}).get("stall_by_stage_s")
    pictures = _deltas_picture(f"{n}-smoke-regression.png", "fwe smoke — regression gate", record)
    pictures += _stages_picture(f"{n}-smoke-stages.png", "fwe smoke — waits by producer stage",
                                [("smoke", by_stage)] if isinstance(by_stage, dict) else [])
    mix = artifact_mix("smoke", record)
    pictures += _mix_picture(f"{n}-smoke-mix.png", "fwe smoke — each source's share against its weight", mix)
    schedule = artifact_schedule("smoke", record)
    pictures += _schedule_picture(f"{n}-smoke-schedule.png", PLANNED_TITLE.format("fwe smoke"), schedule)
    fill = artifact_fill("smoke", record)
    pictures += _fill_picture(f"{n}-smoke-fill.png", "fwe smoke — tokens read into rows and cropped", fill)
    return Section(n, inp, (), tuple(pictures), mix, fill, schedule)


def _heartbeats(n: int, inp: Input) -> Section:
    lines = [line for beat in inp.heartbeats if beat is not None for line in beat.lines]
    timelines, splits = [], []
    for label, group in group_by_process(lines):
        series = timeline(group, label)
        if series.steps:
            timelines.append(series)
            splits.append(stage_split(group, label))
    pictures = []
    if timelines:
        title = "training job — fetch wait per step" + (f", {len(timelines)} processes" if len(timelines) > 1 else "")
        pictures.append(_timeline_picture(f"{n}-heartbeats-timeline.png", title, timelines, splits[0]))
    pictures += _stages_picture(f"{n}-heartbeats-stages.png", "training job — waits by producer stage",
                                [(s.label, s.totals) for s in splits if s is not None])
    mix = heartbeat_mix(lines)
    pictures += _mix_picture(f"{n}-heartbeats-mix.png", "training job — each source's share against its weight", mix)
    schedule = heartbeat_schedule(lines)
    pictures += _schedule_picture(f"{n}-heartbeats-schedule.png", PLANNED_TITLE.format("training job"), schedule)
    fill = heartbeat_fill(lines)
    pictures += _fill_picture(f"{n}-heartbeats-fill.png", "training job — tokens read into rows and cropped", fill)
    return Section(n, inp, tuple(timelines), tuple(pictures), mix, fill, schedule)


PLANNERS = {"measure": _measure, "tune": _tune, "smoke": _smoke, "heartbeats": _heartbeats}


def plan_sections(inputs: list[Input]) -> list[Section]:
    """Each input's section, numbered from 1 in the order given."""
    return [PLANNERS[inp.kind](n, inp) for n, inp in enumerate(inputs, start=1)]

"""Drawing the pictures of runs (matplotlib imported inside each function): a fetch-wait timeline with the training
step, the warmup boundary, queue fill and the per-step stage split; the first-batch phase waterfall; the waits by
producer stage per run or rank."""

from __future__ import annotations

import statistics

from fwe_cli.report.draw_style import colours, legend_below, plain_log_axis
from fwe_cli.report.plan import TimelineData

MIN_WAIT_MS = 1e-3  # a log axis has no zero: waits under a microsecond are drawn at 1 µs
MAX_LABELLED_SERIES = 10  # more processes than this on one timeline: no legend entry each
STAGE_PALETTE = "Dark2"


def _with_gaps(steps, values, parts):
    """x and y with a NaN between head and tail (or any jump in steps), so no line is drawn across steps that were
    not logged."""
    xs, ys = [], []
    for i, (step, value) in enumerate(zip(steps, values)):
        if i and (step != steps[i - 1] + 1 or (parts and parts[i] != parts[i - 1])):
            xs.append(float("nan"))
            ys.append(float("nan"))
        xs.append(step)
        ys.append(float("nan") if value is None else value)
    return xs, ys


def _step_line(axis, timelines) -> float | None:
    steps = [t.step_ms for t in timelines if t.step_ms]
    if not steps:
        return None
    step = statistics.median(steps)
    source = timelines[0].step_source
    how = ("simulated step of the measured run" if source == "plan"
           else "estimated from heartbeat timestamps" + (", median over processes" if len(steps) > 1 else ""))
    axis.axhline(step, color="black", linestyle="--", linewidth=1.4, label=f"training step {step:.3g} ms ({how})")
    return step


def _warmup_line(axes, timelines) -> None:
    warmups = {t.warmup for t in timelines if t.warmup is not None}
    for i, warmup in enumerate(sorted(warmups, key=lambda w: w.boundary)):
        label = (f"warmup end: {warmup.filled} of {warmup.requested} batches queued before step 1 "
                 f"({warmup.wait_ms:.0f} ms)") if i == 0 else None
        for j, axis in enumerate(axes):
            axis.axvspan(0.5, warmup.boundary, color="tab:green", alpha=0.08)
            axis.axvline(warmup.boundary, color="tab:green", linestyle=":", linewidth=2,
                         label=label if j == 0 else None)


def _part_gaps(axis, timeline) -> None:
    if not timeline.parts:
        return
    for i in range(1, len(timeline.steps)):
        if timeline.parts[i] != timeline.parts[i - 1]:
            first, last = timeline.steps[i - 1] + 1, timeline.steps[i] - 1
            axis.axvspan(first - 0.5, last + 0.5, color="grey", alpha=0.15)
            axis.annotate(f"steps {first}–{last} not logged" if last >= first else "head | tail",
                          xy=((first + last) / 2, 0.98), xycoords=("data", "axes fraction"), ha="center", va="top",
                          fontsize=8, color="dimgrey")


def draw_timeline(figure, data: TimelineData) -> None:
    """Wait in next() per step (log ms) with the training step and the warmup boundary; queue fill below when the
    lines carry it; the wait split by producer stage below that for a single series that carries it."""
    timelines = data.timelines
    panels = 1 + bool(any(t.queue_fill for t in timelines)) + bool(data.stages)
    axes = list(figure.subplots(panels, 1, sharex=True, squeeze=False,
                                height_ratios=[2] + [1] * (panels - 1))[:, 0])
    main = axes[0]
    labelled = len(timelines) <= MAX_LABELLED_SERIES
    palette = colours(len(timelines))
    for colour, series in zip(palette, timelines):
        xs, ys = _with_gaps(series.steps, [max(w, MIN_WAIT_MS) for w in series.wait_ms], series.parts)
        main.plot(xs, ys, color=colour, linewidth=1.2 if labelled else 0.8, alpha=1.0 if labelled else 0.6,
                  marker="o" if len(xs) <= 200 else None, markersize=3,
                  label=(series.label if len(timelines) > 1 else "wait in next() per step") if labelled else None)
        _part_gaps(main, series)
    plain_log_axis(main)
    main.set_ylabel("wait in next() (ms, log scale)")
    step = _step_line(main, timelines)
    highest = max([max(t.wait_ms) for t in timelines] + [step or 0.0, MIN_WAIT_MS])
    main.set_ylim(top=highest * 4)  # room above the slowest wait and the step line
    first = timelines[0]
    if len(timelines) == 1 and first.steps[0] == 1:
        main.annotate("first batch", xy=(1, max(first.wait_ms[0], MIN_WAIT_MS)), xytext=(6, 4),
                      textcoords="offset points", fontsize=8)
    _warmup_line(axes, timelines)
    main.grid(True, which="major", alpha=0.3)
    panel = 1
    if any(t.queue_fill for t in timelines):
        queue = axes[panel]
        panel += 1
        for colour, series in zip(palette, timelines):
            if series.queue_fill:
                xs, ys = _with_gaps(series.steps, series.queue_fill, series.parts)
                queue.step(xs, ys, where="mid", color=colour, linewidth=1.2)
        queue.set_ylabel("queue fill\n(batches)")
        queue.set_ylim(bottom=0)
        queue.grid(True, alpha=0.3)
    if data.stages:
        _stage_bars(axes[panel], data.stages)
    axes[-1].set_xlabel("training step")
    legend_below(figure, *axes)


def _stage_bars(axis, split) -> None:
    """Per-step (or per-bin) stacked bars of the wait by stage, ms."""
    centres = [(first + last) / 2 for first, last in split.bins]
    widths = [(last - first + 1) * 0.85 for first, last in split.bins]
    bottoms = [0.0] * len(split.bins)
    for colour, stage, row in zip(colours(len(split.stages), STAGE_PALETTE), split.stages, split.seconds):
        heights = [s * 1000.0 for s in row]
        axis.bar(centres, heights, width=widths, bottom=bottoms, color=colour, label=stage)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    binned = any(last > first for first, last in split.bins)
    axis.set_ylabel("wait by stage\n(ms" + (", summed per bin)" if binned else ")"))
    axis.grid(True, axis="y", alpha=0.3)


def draw_waterfall(figure, waterfall) -> None:
    """Each run's first batch as one bar of consecutive phases, first run on top."""
    axis = figure.subplots()
    palette = dict(zip(waterfall.phases, colours(len(waterfall.phases))))
    longest = max(row.total_s for row in waterfall.rows) or 1.0
    for y, row in enumerate(waterfall.rows):
        for phase, start, duration in row.segments:
            axis.barh(y, duration, left=start, color=palette[phase], edgecolor="white", height=0.6,
                      label=phase if y == 0 else None)
            if duration > 0.08 * longest:
                axis.text(start + duration / 2, y, f"{duration * 1000:.0f} ms", ha="center", va="center", fontsize=8)
        axis.text(row.total_s + 0.01 * longest, y, f"{row.total_s:.3f} s", va="center", fontsize=9,
                  fontweight="bold")
    legend_below(figure, axis, columns=4)
    axis.set_yticks(range(len(waterfall.rows)), [row.label for row in waterfall.rows])
    axis.invert_yaxis()
    axis.set_xlim(0, longest * 1.15)
    axis.set_xlabel("seconds since the process was spawned (each bar ends at its first batch)")
    axis.grid(True, axis="x", alpha=0.3)


def draw_stages(figure, totals) -> None:
    """One bar per series (run or rank): its waits summed by producer stage."""
    axis = figure.subplots()
    biggest = max((sum(row) for row in totals.seconds), default=0.0)
    scale, unit = (1000.0, "ms") if biggest < 1 else (1.0, "s")
    lefts = [0.0] * len(totals.labels)
    for colour, (i, stage) in zip(colours(len(totals.stages), STAGE_PALETTE), enumerate(totals.stages)):
        widths = [row[i] * scale for row in totals.seconds]
        axis.barh(range(len(totals.labels)), widths, left=lefts, color=colour, label=stage, height=0.6)
        lefts = [a + b for a, b in zip(lefts, widths)]
    for y, total in enumerate(lefts):
        axis.text(total, y, f" {total:.3g} {unit}", va="center", fontsize=8)
    axis.set_yticks(range(len(totals.labels)), totals.labels)
    axis.invert_yaxis()
    axis.set_xlim(0, (max(lefts) or 1.0) * 1.15)
    axis.set_xlabel(f"time blocked in next(), by what the producer was doing ({unit})")
    legend_below(figure, axis, columns=4)
    axis.grid(True, axis="x", alpha=0.3)

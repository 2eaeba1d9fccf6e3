"""report.md: each input's figures as Markdown tables, with its pictures linked beside them (only those drawn), in
GitHub's flavour so a CI job can append it to its step summary (`cat OUT/report.md >> "$GITHUB_STEP_SUMMARY"`)."""

from __future__ import annotations

from fwe_cli.loader.pipeline.quantiles import percentiles_ms
from fwe_cli.measure.tune_warmup import warmup_text
from fwe_cli.report.figures import cell_text, format_metric, regression_deltas, tune_heatmaps
from fwe_cli.report.mix_shares import MixShares, share_text
from fwe_cli.report.plan import Section
from fwe_cli.report.row_fill import RowFill
from fwe_cli.report.schedule_shares import ScheduleShares
from fwe_cli.report.series import Timeline

TITLES = {"measure": "fwe measure", "tune": "fwe tune", "smoke": "fwe smoke", "heartbeats": "training job heartbeats"}


def cell(value) -> str:
    """A table cell: pipes escaped, one line."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g} ms" if value < 1 else f"{value:,.1f} ms"


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _regression(record: dict) -> list[str]:
    deltas = regression_deltas(record.get("regression"))
    if deltas is None:
        return []
    lines = [f"**Regression gate: {'PASS' if deltas.passed else 'REGRESSED'}** against `{deltas.baseline}`", ""]
    lines += table(["metric", "baseline", "now", "worse by", "bound", "result", "note"], [
        [bar.metric, format_metric(bar.metric, bar.baseline), format_metric(bar.metric, bar.current),
         "∞ (baseline 0)" if bar.worse_pct is None else f"{bar.worse_pct:+.1f} %", f"{bar.bound_pct:g} %",
         "pass" if bar.passed else "**REGRESSED**", bar.note] for bar in deltas.bars])
    return lines + [""] + [f"- {note}" for note in deltas.notes] + ([""] if deltas.notes else [])


def _measure(section: Section) -> list[str]:
    record = section.input.record or {}
    step_ms = (record.get("plan") or {}).get("step_ms")
    rows = []
    for run in record.get("runs") or []:
        phases = run.get("phases") or {}
        slowest = max(phases, key=lambda p: phases[p] or 0) if phases else None
        rows.append([run.get("kind"), seconds(run.get("first_batch_s")),
                     f"{slowest} {seconds(phases[slowest])}" if slowest else "—", ms(run.get("fetch_p50_ms")),
                     ms(run.get("fetch_p95_ms")), ms(run.get("fetch_p99_ms")), percent(run.get("stall_fraction")),
                     "—" if run.get("stalled_steps") is None else run["stalled_steps"],
                     "—" if run.get("tokens_per_s") is None else f"{run['tokens_per_s']:,.0f}",
                     (run.get("error") or {}).get("message", "") if isinstance(run.get("error"), dict) else ""])
    stall = f"stall @{step_ms:g} ms" if step_ms else "stall"
    lines = table(["run", "first batch", "slowest phase", "fetch p50", "p95", "p99", stall, "stalled steps",
                   "tokens/s", "error"], rows) + [""]
    lines += _advice(record)
    verdict = record.get("verdict") or {}
    if verdict.get("checks"):
        lines.append("Targets: " + ", ".join(f"{c['target']} {c['value']:g} ≤ {c['limit']:g} "
                                             f"{'pass' if c['pass'] else '**missed**'}" for c in verdict["checks"]))
        lines.append("")
    return lines + _regression(record)


def _advice(record: dict) -> list[str]:
    """Where a measure's stall went (stage shares) and the warmup that would have removed its stalled steps."""
    from fwe_cli.measure.warmup import advice_line

    split, lines = record.get("stall_split"), []
    if split:
        lines += [f"Where the wait went: {split['line']}", ""]
    if "warmup_advice" in record:
        config = record.get("config") or {}
        queue_depth, warmup_batches = config.get("queue_depth", 0), config.get("warmup_batches", 0)
        lines += [advice_line(record["warmup_advice"], queue_depth, warmup_batches), ""]
    return lines


def _tune(section: Section) -> list[str]:
    record = section.input.record or {}
    rec, lines = record.get("recommendation"), []
    if rec:
        lines += [f"**Recommended: {rec['label']}** (confidence {rec.get('confidence')}): {rec.get('reason', '')}", ""]
        lines += [f"- {line}" for line in warmup_text(record.get("warmup"))] + ([""] if record.get("warmup") else [])
        lines += [f"`{rec.get('export', '')}`", ""]
    else:
        lines += ["**No recommendation**: no setting ran ok.", ""]
    for heatmap in tune_heatmaps(record):
        caption = f"median {heatmap.label}" + ("" if heatmap.threads is None
                                                else f", tokenizer threads {heatmap.threads}")
        rows = [[str(d)] + [("★ " if heatmap.marked == (r, c) else "") + cell_text(heatmap, r, c)
                            for c in range(len(heatmap.queue_depths))] for r, d in enumerate(heatmap.doc_batches)]
        lines += [f"{caption} (★ recommended, ≈ within noise of the best, !p95 fetch p95 over target):", ""]
        lines += table(["doc batch \\ Q"] + [f"Q={q}" for q in heatmap.queue_depths], rows) + [""]
    if record.get("partial"):
        lines += [f"**Partial**: {(record.get('budget') or {}).get('stopped', 'the budget ran out')}", ""]
    return lines


def _smoke(section: Section) -> list[str]:
    record = section.input.record or {}
    error = record.get("error") if isinstance(record.get("error"), dict) else None
    result = "OK" if record.get("ok") else f"FAILED ({error['message']})" if error else "FAILED"
    lines = table(["result", "first batch", "batches", "tokens/s"], [[
        result, seconds(record.get("first_batch_s")), record.get("batches", "—"),
        "—" if record.get("tokens_per_s") is None else f"{record['tokens_per_s']:,.0f}"]]) + [""]
    if record.get("regression") is None:
        lines += ["No regression record: run `fwe smoke --baseline ARTIFACT.json` for the gate's deltas.", ""]
    return lines + _regression(record)


def timeline_rows(timelines: tuple[Timeline, ...]) -> list[list]:
    rows = []
    for series in timelines:
        waits = percentiles_ms([w / 1000.0 for w in series.steady_wait_ms])
        fills = [f for f in series.queue_fill or () if f is not None]
        step = "—" if not series.step_ms else ms(series.step_ms) + (" (est.)" if series.step_source == "timestamps"
                                                                    else "")
        rows.append([series.label, len(series.steps), seconds(series.first_batch_s), ms(waits["p50"]),
                     ms(waits["p95"]), ms(waits["max"]), percent(series.stall_fraction), step,
                     "—" if not fills else f"{sum(fills) / len(fills):.1f}", len(series.errors)])
    return rows


def _heartbeats(section: Section) -> list[str]:
    if not section.timelines:
        return ["No `fineweb_fetch` line: nothing to draw.", ""]
    return ["Waits and “time waiting” (time blocked in next() over the wall time) count the steps after the first "
            "batch; step: the training step estimated from the gaps between heartbeat lines.", ""]


def mix_lines(mix: MixShares) -> list[str]:
    """The mix's table: each source's weight against its realized shares of tokens and documents, and what they
    count (— where none was counted: a mix by documents counts no tokens); a line before it says over what, what
    the weights are shares of and the largest gap."""
    of = (f"the weights are shares of {mix.by}" if mix.by else
          "the weights are shares of tokens or of documents (the heartbeat lines do not say which)")
    gap = "" if mix.largest_gap is None else (f"; the largest gap between a weight and its realized share: "
                                              f"{mix.largest_gap * 100:.2f} points")
    lines = [f"**Mix of {len(mix.sources)} sources** over {mix.over}: {of}{gap}.", ""]
    return lines + table(["source", "weight", "share of tokens", "share of documents", "documents", "tokens"], [
        [s.source, share_text(s.weight), share_text(s.token_share), share_text(s.document_share),
         "—" if s.document_share is None else f"{s.documents:,}",
         "—" if s.token_share is None else f"{s.tokens:,}"] for s in mix.sources]) + [""]


def schedule_lines(schedule: ScheduleShares) -> list[str]:
    """The schedule's table: per stage, the steps it spans, the tokens it gave, and each source's planned share (what
    the weights in force asked over the tokens read in the stage) against the share it delivered."""
    gap = schedule.gap_text() and f"; the largest gap between a stage's planned and delivered share: " \
        f"{schedule.gap_text()}"
    lines = [f"**Schedule of {len(schedule.rows)} stages** over {schedule.over}: each source's planned share of a "
             f"stage's tokens → the share it delivered{gap}.", ""]
    return lines + table(["stage", "steps", "tokens"] + list(schedule.sources), [
        [row.stage, f"{row.steps[0]:,} – {'end' if row.steps[1] is None else f'{row.steps[1]:,}'}", f"{row.tokens:,}"]
        + [f"{share_text(p)} → {share_text(d)}" for p, d in zip(row.planned, row.delivered)]
        for row in schedule.rows]) + [""]


def fill_lines(fill: RowFill) -> list[str]:
    """The rows' fill: per run (trial, process), its packing, the tokens read and the tokens and documents cropped."""
    return ["**Rows' fill**: of the tokens read, those cropped at a row's end (none with `--pack stream`).", ""] + \
        table(["run", "packing", "tokens read", "cropped tokens", "cropped share", "cropped documents"], [
            [row.label, row.pack or "—", f"{row.tokens_read:,}", f"{row.cropped_tokens:,}",
             percent(row.cropped_share), f"{row.cropped_documents:,}"] for row in fill.rows]) + [""]


RENDER = {"measure": _measure, "tune": _tune, "smoke": _smoke, "heartbeats": _heartbeats}


def render_markdown(sections: list[Section], drawn: set[str], notes: list[str], warnings: list[str]) -> str:
    """The whole report.md: a header, each section (its tables, its drawn pictures), then the warnings."""
    lines = ["# fwe report", ""] + [f"{note}" for note in notes] + ([""] if notes else [])
    for section in sections:
        inp = section.input
        lines += [f"## {section.number}. {TITLES[inp.kind]} — `{inp.path}`", ""]
        lines += RENDER[inp.kind](section)
        if section.timelines:
            lines += table(["process", "steps", "loader first batch", "wait p50", "p95", "max", "time waiting",
                            "step", "queue fill", "errors"], timeline_rows(section.timelines)) + [""]
        if section.mix is not None:
            lines += mix_lines(section.mix)
        if section.schedule is not None:
            lines += schedule_lines(section.schedule)
        if section.fill is not None:
            lines += fill_lines(section.fill)
        for picture in section.pictures:
            if picture.file in drawn:
                lines += [f"![{picture.title}]({picture.file})", ""]
    if warnings:
        lines += ["## Warnings", ""] + [f"- {cell(w)}" for w in warnings] + [""]
    return "\n".join(lines).rstrip() + "\n"

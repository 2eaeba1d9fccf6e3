"""What a mix's schedule planned against what it delivered, over the steps, for `fwe report`.

Each `sources` list fwe records of a scheduled mix gives each source's `stages`: the steps a stage spans, its weights
at its start and its end (a ramp goes from one to the other), the tokens its weights asked of the source (`planned`)
and those the source gave (`tokens`). From artifacts (a smoke's `loader.sources`, each measure run's or tune
trial's `sources`) they are summed over the runs: a stage's delivered share is drawn over its steps. From heartbeat
lines, each process's last `fineweb_mix` line gives them, and every line its `schedule` (the step, stage and
weights in force where the mix was reading) and its sources' tokens so far: each process's delivered share between
two of its lines is drawn over the steps between.

Pure functions of those (no files, no drawing); None where no schedule was read.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwe_cli.report.mix_shares import MIX_EVENT, plural, whole_count
from fwe_cli.report.series import group_by_process


@dataclass(frozen=True)
class StageRow:
    """One stage: its number, the steps it spans [from, to) (to None: the end of the data), each source's weight at
    its start and at its end, its share of what the weights asked (planned) and of what it gave (delivered), and the
    tokens the stage gave."""

    stage: int
    steps: tuple
    start: tuple
    end: tuple
    planned: tuple
    delivered: tuple
    tokens: int


@dataclass(frozen=True)
class ScheduleShares:
    """A scheduled mix's plan and delivery over the steps (see the module docstring)."""

    sources: tuple[str, ...]
    rows: tuple[StageRow, ...]
    planned: tuple
    """The weights in force over the steps: (step, each source's share), in order (a line through them)."""
    delivered: tuple
    """(from step, to step, each source's share of the tokens delivered in between)."""
    over: str

    @property
    def largest_gap(self) -> tuple[float, StageRow] | None:
        """The largest distance between a stage's planned and delivered share of a source, and that stage (a stage of
        few tokens, such as what was read ahead past the last, strays further); None when nothing was read."""
        gaps = [(abs(p - d), row) for row in self.rows for p, d in zip(row.planned, row.delivered)
                if p is not None and d is not None]
        return max(gaps, key=lambda gap: gap[0]) if gaps else None

    def gap_text(self) -> str:
        """The largest gap in words: '0.65 points, in stage 2 (146,726 tokens)'; '' when nothing was read."""
        gap = self.largest_gap
        return "" if gap is None else f"{gap[0] * 100:.2f} points, in stage {gap[1].stage} ({gap[1].tokens:,} tokens)"


def _shares(values: list) -> tuple:
    total = sum(values)
    return tuple(v / total if total else None for v in values)


def _names(entries: list) -> tuple[str, ...]:
    return tuple(str(e.get("id") or e.get("source")) for e in entries)


def _rows(lists: list[list]) -> list[StageRow]:
    """Each stage's row, its figures summed over `lists` (each a `sources` list with `stages`), its steps and weights
    the last list's (a process resumed with a schedule changed after its step)."""
    stages: dict[int, list] = {}
    for entries in lists:
        n = len(entries)
        for i, entry in enumerate(entries):
            for stage in entry.get("stages") or ():
                row = stages.setdefault(stage["stage"], [None, [0.0] * n, [0.0] * n, [0.0] * n, [0] * n])
                start, end = (stage.get("weights") or (0.0, 0.0))[:2]
                row[0] = tuple(stage.get("steps") or (0, None))  # (a later list's: a schedule changed since)
                row[1][i], row[2][i] = float(start), float(end)
                row[3][i] += float(stage.get("planned") or 0)
                row[4][i] += whole_count(stage.get("tokens"))
    return [StageRow(k, steps, tuple(start), tuple(end), _shares(planned), _shares(got), sum(got))
            for k, (steps, start, end, planned, got) in sorted(stages.items())]


def _planned_line(rows: list[StageRow], ends: dict[int, int]) -> tuple:
    """(step, shares) at each stage's start and end: a line through the weights in force."""
    return tuple(point for row in rows for point in ((row.steps[0], row.start), (ends[row.stage], row.end)))


def artifact_schedule(kind: str, record: dict) -> ScheduleShares | None:
    """A smoke artifact's schedule, or a measure summary's (its runs summed) or a tune summary's (its trials)."""
    if kind == "smoke":
        lists = [(record.get("loader") or {}).get("sources")]
    else:
        runs = [run for run in record.get("runs" if kind == "measure" else "trials") or [] if isinstance(run, dict)]
        lists = [run.get("sources") or (run.get("loader") or {}).get("sources") for run in runs]
    lists = [entries for entries in lists if isinstance(entries, list) and any(e.get("stages") for e in entries)]
    if not lists:
        return None
    rows = _rows(lists)
    config = record.get("config") or {}
    per_step = max(1, int(config.get("batch_size") or 1) * int(config.get("seq_len") or 1) * len(lists))
    ends = {row.stage: row.steps[1] if row.steps[1] is not None else row.steps[0] + max(1, row.tokens // per_step)
            for row in rows}  # (an open stage: as far as its tokens reach)
    delivered = tuple((row.steps[0], ends[row.stage], row.delivered) for row in rows if row.tokens)
    what = "the smoke run" if kind == "smoke" else plural(len(lists), *(("run", "runs") if kind == "measure"
                                                                       else ("trial", "trials")))
    return ScheduleShares(_names(lists[0]), tuple(rows), _planned_line(rows, ends), delivered, what)


def heartbeat_schedule(lines) -> ScheduleShares | None:
    """A job's schedule from its `fineweb_mix` lines that carry one (see the module docstring)."""
    delivered, last = [], []
    for _, group in group_by_process(lines):
        found = [line for line in group if line.get("msg") == MIX_EVENT and isinstance(line.get("schedule"), dict)
                 and isinstance(line.get("sources"), list)]
        for before, line in zip(found, found[1:]):
            got = [whole_count(b.get("tokens")) - whole_count(a.get("tokens"))
                   for a, b in zip(before["sources"], line["sources"])]
            if sum(got) > 0:
                delivered.append((before["schedule"]["step"], line["schedule"]["step"], _shares(got)))
        last += found[-1:]
    if not last:
        return None
    rows = _rows([line["sources"] for line in last])
    reach = max([line["schedule"]["step"] for line in last] + [hi for _, hi, _ in delivered])
    ends = {row.stage: row.steps[1] if row.steps[1] is not None else max(reach, row.steps[0] + 1) for row in rows}
    whose = "its" if len(last) == 1 else "each one’s"
    over = plural(len(last), "process", "processes") + f" as of {whose} last {MIX_EVENT} line"
    return ScheduleShares(_names(last[0]["sources"]), tuple(rows), _planned_line(rows, ends), tuple(delivered), over)

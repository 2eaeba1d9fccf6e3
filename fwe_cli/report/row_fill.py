"""How full the rows came of the tokens read, for `fwe report`: by packing (stream, greedy, best-fit), the share of
the tokens read that reached a row and the share cropped at a row's end, from the `cropped` counters fwe records
({pack, tokens, documents, tokens_read}: a smoke artifact's `loader.cropped`, each measure run's or tune trial's
`cropped`) or from a training job's `fineweb_progress` heartbeat lines (each process's last one).

Pure functions of those (no files, no drawing). A row per run, trial or process whose rows start at documents (greedy
or best-fit: `--pack stream` crops nothing); none where nothing was counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwe_cli.report.series import group_by_process

PROGRESS_EVENT = "fineweb_progress"


@dataclass(frozen=True)
class FillRow:
    """One run's (trial's, process's) rows: its label, packing, tokens read and the tokens and documents cropped."""

    label: str
    pack: str | None
    tokens_read: int
    cropped_tokens: int
    cropped_documents: int

    @property
    def cropped_share(self) -> float | None:
        """Of the tokens read, the share cropped (None: none read)."""
        return self.cropped_tokens / self.tokens_read if self.tokens_read else None


@dataclass(frozen=True)
class RowFill:
    rows: tuple[FillRow, ...]


def _count(value) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _row(label: str, cropped) -> FillRow | None:
    """A run's row, or None: nothing counted, or rows that cut the stream wherever they end (nothing to crop)."""
    if not isinstance(cropped, dict) or not _count(cropped.get("tokens_read")) or cropped.get("pack") == "stream" \
            or (cropped.get("pack") is None and not _count(cropped.get("tokens"))):
        return None
    return FillRow(label, cropped.get("pack"), _count(cropped.get("tokens_read")), _count(cropped.get("tokens")),
                   _count(cropped.get("documents")))


def _fill(rows: list) -> RowFill | None:
    rows = [row for row in rows if row is not None]
    return RowFill(tuple(rows)) if rows else None


def artifact_fill(kind: str, record: dict, labels: list[str] | None = None) -> RowFill | None:
    """A smoke artifact's row fill (loader.cropped), or each run's of a measure summary (`labels`: the runs') or each
    trial's of a tune summary; None when none counts its tokens."""
    if kind == "smoke":
        return _fill([_row("smoke", (record.get("loader") or {}).get("cropped"))])
    runs = [run for run in record.get("runs" if kind == "measure" else "trials") or [] if isinstance(run, dict)]
    names = labels or [f"{'run' if kind == 'measure' else 'trial'} {i + 1}" for i in range(len(runs))]
    return _fill([_row(name, run.get("cropped") or (run.get("loader") or {}).get("cropped"))
                  for name, run in zip(names, runs)])


def heartbeat_fill(lines) -> RowFill | None:
    """Each process's row fill from its last `fineweb_progress` line ({tokens, cropped_tokens, cropped_documents},
    every report_docs documents); None when no line counts its crops."""
    rows = []
    for label, group in group_by_process(lines):
        found = [line for line in group if line.get("msg") == PROGRESS_EVENT and "cropped_tokens" in line]
        if found:
            last = found[-1]
            rows.append(_row(label, {"tokens_read": last.get("tokens"), "tokens": last.get("cropped_tokens"),
                                     "documents": last.get("cropped_documents"), "pack": last.get("pack")}))
    return _fill(rows)

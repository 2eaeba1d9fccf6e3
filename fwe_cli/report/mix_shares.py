"""What a mix of sources realized against its weights, for `fwe report`: each source's share of the tokens and of
the documents read, from the `sources` lists fwe records ({source, weight, documents, tokens}: a smoke artifact's
`loader.sources`, each measure run's or tune trial's `sources`) or from a training job's `fineweb_mix` heartbeat
lines (each process's last one).

Pure functions of those (no files, no drawing). Several lists (a measure's runs, a job's processes) are summed
source by source: each process counts from its own start, so the sum is what they read together. Only a mix of two
or more sources has anything to show: for one source the functions return None.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwe_cli.report.series import group_by_process

MIX_EVENT = "fineweb_mix"


@dataclass(frozen=True)
class SourceShare:
    """One source of the mix: its weight (a share, the weights summing to 1) and what was read from it."""

    source: str
    weight: float
    documents: int
    tokens: int
    token_share: float | None
    """Its tokens over all sources' tokens (None: no token was read)."""
    document_share: float | None
    """Its documents over all sources' documents (None: no document was read)."""


@dataclass(frozen=True)
class MixShares:
    """A mix's sources, their weights and realized shares, summed over `over`."""

    by: str | None
    """What the weights are shares of: 'tokens' or 'documents'; None where the input does not say (heartbeats)."""
    sources: tuple[SourceShare, ...]
    over: str
    """What the figures were summed over, in words ('2 runs', '3 processes')."""

    def realized(self, share: SourceShare) -> float | None:
        """The source's realized share of what the weights are shares of (None: `by` unknown, or nothing read)."""
        if self.by is None:
            return None
        return share.token_share if self.by == "tokens" else share.document_share

    @property
    def largest_gap(self) -> float | None:
        """The largest distance between a source's weight and its realized share (a share: 0.002 is 0.2 points);
        None when `by` is unknown or nothing was read."""
        gaps = [abs(r - s.weight) for s in self.sources if (r := self.realized(s)) is not None]
        return max(gaps) if gaps else None


def share_text(value: float | None) -> str:
    """A share as report.md and the picture write it: 69.83 % (— for none)."""
    return "—" if value is None else f"{value * 100:.2f} %"


def whole_count(value) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def summed(lists: list, by: str | None, over: str) -> MixShares | None:
    """The `sources` lists summed source by source (matched by place and name; a weight from the first list naming
    the source); None when no list names two sources or more."""
    lists = [entries for entries in lists if isinstance(entries, list)]
    if not any(len(entries) > 1 for entries in lists):
        return None
    rows: dict[tuple[int, str], list] = {}
    for entries in lists:
        for place, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            row = rows.setdefault((place, str(entry.get("source"))), [entry.get("weight"), 0, 0])
            row[1] += whole_count(entry.get("documents"))
            row[2] += whole_count(entry.get("tokens"))
    documents, tokens = sum(r[1] for r in rows.values()), sum(r[2] for r in rows.values())
    weight = {key: float(r[0]) if isinstance(r[0], (int, float)) else 0.0 for key, r in rows.items()}
    total_weight = sum(weight.values()) or 1.0  # shares already; again to 1 should lists name other sources
    return MixShares(by if by in ("tokens", "documents") else None, tuple(
        SourceShare(name, round(weight[(place, name)] / total_weight, 6), docs, toks,
                    toks / tokens if tokens else None, docs / documents if documents else None)
        for (place, name), (_, docs, toks) in rows.items()), over)


def mixture_by(source: dict | None) -> str | None:
    """The `by` of the first mixture in a config's source tree (its `to_json()`), None when it holds none."""
    if not isinstance(source, dict):
        return None
    if source.get("kind") == "mixture":
        return source.get("by") or "tokens"
    return next((by for child in source.get("children") or () if (by := mixture_by(child))), None)


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def artifact_mix(kind: str, record: dict) -> MixShares | None:
    """A smoke artifact's mix (loader.sources), or a measure summary's (each run's sources, summed) or a tune
    summary's (each trial's); None when it holds no mix of two sources or more."""
    by = mixture_by((record.get("config") or {}).get("source"))
    if kind == "smoke":
        return summed([(record.get("loader") or {}).get("sources")], by, "the smoke run")
    runs = [run for run in record.get("runs" if kind == "measure" else "trials") or [] if isinstance(run, dict)]
    lists = [run.get("sources") or (run.get("loader") or {}).get("sources") for run in runs]
    lists = [entries for entries in lists if isinstance(entries, list)]
    return summed(lists, by, plural(len(lists), *(("run", "runs") if kind == "measure" else ("trial", "trials"))))


def heartbeat_mix(lines) -> MixShares | None:
    """A job's mix from its `fineweb_mix` lines ({step, sources}, every few batches): each process's last line,
    summed over the processes (ranks, and a rank's restarts); None when no line names two sources or more."""
    last = []
    for _, group in group_by_process(lines):
        found = [line for line in group if line.get("msg") == MIX_EVENT and isinstance(line.get("sources"), list)]
        if found:
            last.append(found[-1])
    by = next((line.get("by") for line in last if line.get("by")), None)
    steps = sorted({line["step"] for line in last if isinstance(line.get("step"), int)})
    at = "" if not steps else f", step {steps[0]}" if len(steps) == 1 else f", steps {steps[0]} to {steps[-1]}"
    whose = "its" if len(last) == 1 else "each one's"
    return summed([line["sources"] for line in last], by,
                  plural(len(last), "process", "processes") + f" as of {whose} last {MIX_EVENT} line{at}")

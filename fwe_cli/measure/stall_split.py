"""Where a measurement's stall went, in one line: "stall 4.1 %: 83 % Hub reads, 12 % tokenize".

Pure functions of measured run records (`fwe_cli.measure.cold_warm.spawn_run`): each carries its steady-state
`stall_fraction` and `wall_s`, and `stall_by_stage_s`, the waits after the first batch split by what the producer
was doing (fwe_cli.loader.flow.stages). Runs are pooled: the time blocked over the wall time of them all, and the waits'
stages summed.
"""

from __future__ import annotations

STAGE_NAMES = {"open": "opening the source", "tokenizer_load": "tokenizer load", "parse": "parquet decode",
               "tokenize": "tokenize", "pack": "pack", "queue_put": "queue put", "queue_get": "hand-off",
               "other": "other"}
READS = {"hub": "Hub reads", "local": "disk reads", "synthetic": "document generation"}
SHOWN = 4  # stages named in the line; the rest are summed as "other stages"
MIN_SHARE = 0.01  # a stage under 1 % of the waits is not worth naming


def stage_name(stage: str, source_kind: str | None) -> str:
    """How the line names a stage key: source_read after the source (Hub reads, disk reads, ...)."""
    if stage == "source_read":
        return READS.get(source_kind or "", "source reads")
    return STAGE_NAMES.get(stage, stage)


def pooled(runs: list[dict]) -> dict | None:
    """{stall_fraction, blocked_s, by_stage_s, runs} over the runs that measured a split; None when none did."""
    usable = [r for r in runs if not r.get("error") and isinstance(r.get("stall_by_stage_s"), dict)]
    if not usable:
        return None
    by_stage: dict[str, float] = {}
    for run in usable:
        for stage, seconds in run["stall_by_stage_s"].items():
            by_stage[stage] = by_stage.get(stage, 0.0) + seconds
    blocked = sum(by_stage.values())
    walls = [r.get("wall_s") for r in usable]
    fractions = [r.get("stall_fraction") for r in usable]
    stall = None
    if all(f is not None for f in fractions) and all(walls) and sum(walls):
        stall = sum(f * w for f, w in zip(fractions, walls)) / sum(walls)
    return {"stall_fraction": None if stall is None else round(stall, 6), "blocked_s": round(blocked, 6),
            "by_stage_s": {k: round(v, 6) for k, v in by_stage.items()}, "runs": len(usable)}


def stall_line(split: dict | None, source_kind: str | None) -> str:
    """'stall 4.1 %: 83 % Hub reads, 12 % tokenize' (the stall against the training step, then each stage's share of
    the waits, largest first); 'waits' instead of the stall for a run with no step (--step-ms 0)."""
    if split is None:
        return "stall: not measured (no run carried the split of its waits)"
    head = "waits" if split["stall_fraction"] is None else f"stall {100 * split['stall_fraction']:.1f} %"
    total = split["blocked_s"]
    if total <= 0:
        return f"{head}: no wait"
    shares = sorted(((seconds / total, stage) for stage, seconds in split["by_stage_s"].items()), reverse=True)
    named = [(share, stage) for share, stage in shares[:SHOWN] if share >= MIN_SHARE]
    rest = 1.0 - sum(share for share, _ in named)
    parts = [f"{100 * share:.0f} % {stage_name(stage, source_kind)}" for share, stage in named]
    if rest >= MIN_SHARE:
        parts.append(f"{100 * rest:.0f} % other stages")
    waited = f"{total * 1000:.3g} ms" if total < 1 else f"{total:.3g} s"
    return f"{head}: " + ", ".join(parts) + f" (of {waited} waited after the first batch)"

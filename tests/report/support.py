"""Made-up heartbeat lines in the users' format, with the fields other work adds (queue_fill, wait_s_by_stage,
part), a tune summary ranked by fwe tune's own rule from made-up trials, and the PNG header reader the picture tests
use."""

from __future__ import annotations

import struct
from pathlib import Path

from fwe_cli.measure.tune_rank import OBJECTIVES, rank_settings, recommend
from tests.helpers import write_jsonl

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
T0 = 1_795_000_000.0


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, which the format puts first: 8-byte signature, then length, type,
    width and height as big-endian integers. Raises AssertionError on anything that is not a PNG."""
    head = Path(path).read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    length, kind, width, height = struct.unpack(">I4sII", head[8:24])
    assert kind == b"IHDR" and length == 13, f"{path}: first chunk is {kind!r}, not IHDR"
    return width, height


def job_lines(rank: int, steps: int, step_s: float = 0.1, pid: int = 1000, warmup: tuple[int, int] | None = (4, 4),
              slow_every: int = 50, extras: bool = True, part_at: int | None = None) -> list[dict]:
    """One training process's heartbeat: ready, warmup (requested, filled), then a fetch per step, every
    `slow_every`-th step waiting 250 ms (a source read), the others 0.2 ms; each line written when its fetch
    returned, `step_s` of compute apart. With `extras`: queue_fill and wait_s_by_stage on every fetch. With
    `part_at`: steps before it are the head, the rest the tail (numbered as if 1000 steps had passed between)."""
    base = {"pid": pid, "rank": rank}
    lines = [dict(base, ts=T0, step=0, msg="fineweb_loader_ready", dt=0.5)]
    if warmup:
        lines.append(dict(base, ts=T0, step=0, msg="fineweb_loader_warmup", requested=warmup[0], filled=warmup[1],
                          wait_ms=120.0))
    ts = T0
    for i in range(1, steps + 1):
        slow = i % slow_every == 0
        wait = 0.25 if slow else 0.0002
        ts += step_s + wait
        step = i if part_at is None or i < part_at else i + 1000
        line = dict(base, ts=round(ts, 6), step=step, msg="fineweb_fetch", dt_fetch_s=wait, fetch_p50_ms=0.2,
                    fetch_p95_ms=250.0)
        if extras:
            line["queue_fill"] = 0 if slow else 3
            line["wait_s_by_stage"] = ({"source_read": 0.2, "tokenize": 0.05} if slow
                                       else {"queue_put": 0.0002})
        if part_at is not None:
            line["part"] = "head" if i < part_at else "tail"
        lines.append(line)
    return lines


def write_job(folder: Path, ranks: int = 2, steps: int = 120, **kw) -> Path:
    """A training job's heartbeat directory: heartbeat_rank{r}.jsonl for each rank."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        write_jsonl(folder / f"heartbeat_rank{rank}.jsonl", job_lines(rank, steps, pid=1000 + rank, **kw))
    return folder


def ranked_summary(values: dict[tuple[int, int], list[float]], objective: str = "stall",
                   p95_ms: dict[tuple[int, int], float] | None = None) -> dict:
    """A tune summary of made-up trials (doc batch, Q) -> the objective's value per repeat, ranked and recommended by
    fwe tune's own rule (tune_rank), shaped as run_tune writes it; `p95_ms`: a setting's fetch p95 (default 1 ms,
    the target is 100)."""
    rank_objective = OBJECTIVES[objective]
    settings = [{"doc_batch": d, "queue_depth": q} for d, q in values]
    trials = [{"setting": s, "error": None, rank_objective.metric: v,
               "fetch_p95_ms": (p95_ms or {}).get((s["doc_batch"], s["queue_depth"]), 1.0)}
              for s in settings for v in values[(s["doc_batch"], s["queue_depth"])]]
    ranked = rank_settings(settings, trials, rank_objective, 100.0)
    rec = recommend(ranked, rank_objective, 100.0, swept_threads=False, step_ms=100.0)
    plan = {"doc_batches": sorted({d for d, _ in values}), "queue_depths": sorted({q for _, q in values}),
            "threads": None}
    return {"settings": ranked, "recommendation": rec, "plan": plan,
            "objective": {"name": objective, "metric": rank_objective.metric, "label": rank_objective.label,
                          "direction": "max" if rank_objective.sign > 0 else "min"}}

"""Heartbeat files in the users' format; warmup reporting; progress every report_docs documents; telemetry that does
not grow with the steps."""

from collections import deque

import orjson
import pytest

from fwe_cli.loader import FineWebLoader, SourceError, resolve_config
from fwe_cli.loader.flow.prefetch import KEEP_PRODUCED
from fwe_cli.loader.flow.stages import STAGES
from fwe_cli.loader.pipeline.encoding import effective_threads
from fwe_cli.loader.pipeline.quantiles import MAX_BUCKETS
from fwe_cli.loader.pipeline.telemetry import ROLLING_WINDOW

BASE_KEYS = {"ts", "iso", "pid", "rank", "step", "msg"}


def read_lines(path):
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_heartbeat_lines_events_and_fetch_percentiles(tmp_path):
    """ready/warmup/fetch/progress events carry the fields the users' dashboards read."""
    cfg = resolve_config(env={}, source="synthetic", seq_len=256, batch_size=2, warmup_batches=2, queue_depth=4,
                         report_docs=3, heartbeat_dir=str(tmp_path), rank=3)
    with FineWebLoader(cfg) as loader:
        for _ in range(10):
            next(loader)
    lines = read_lines(tmp_path / "heartbeat_rank3.jsonl")
    assert all(BASE_KEYS <= set(line) and line["rank"] == 3 for line in lines)
    by_msg = {}
    for line in lines:
        by_msg.setdefault(line["msg"], []).append(line)
    assert by_msg["fineweb_loader_ready"][0]["dt"] > 0
    warm = by_msg["fineweb_loader_warmup"][0]
    assert warm["requested"] == 2 and 0 <= warm["filled"] <= 2 and warm["wait_ms"] >= 0
    fetch = by_msg["fineweb_fetch"]
    assert [f["step"] for f in fetch] == list(range(1, 11))
    assert all({"dt_fetch_s", "fetch_p50_ms", "fetch_p95_ms"} <= set(f) for f in fetch)
    assert fetch[-1]["fetch_p95_ms"] >= fetch[-1]["fetch_p50_ms"]
    progress = by_msg["fineweb_progress"]
    # the first doc batch (4 documents) already crosses report_docs=3, so a line is guaranteed
    assert progress and progress[0]["docs"] >= 3
    assert all({"docs", "tokens", "docs_per_s", "tokens_per_s"} <= set(p) for p in progress)
    assert [p["docs"] for p in progress] == sorted({p["docs"] for p in progress})


def test_warmup_fills_queue_before_first_step():
    """With warmup, the first fetch finds the requested batches already queued."""
    cfg = resolve_config(env={}, source="synthetic", seq_len=128, warmup_batches=4, queue_depth=4)
    with FineWebLoader(cfg) as loader:
        report = loader.warmup()
        stats_before = loader.pipeline.batches
        next(loader)
    assert report["requested"] == 4 and report["filled"] == 4
    assert stats_before >= 4


def test_loader_error_event_is_written(tmp_path):
    """A failing first batch writes exactly one fineweb_loader_error line naming the cause."""
    cfg = resolve_config(env={}, local_path=str(tmp_path / "nope.jsonl"), heartbeat_dir=str(tmp_path))
    loader = FineWebLoader(cfg)
    with pytest.raises(SourceError, match="nope.jsonl: no such file"):
        next(loader)
    loader.close()
    errors = [l for l in read_lines(tmp_path / "heartbeat_rank0.jsonl") if l["msg"] == "fineweb_loader_error"]
    assert len(errors) == 1 and "nope.jsonl" in errors[0]["error"]


def _kept(loader) -> dict[str, int]:
    """The size of every list, dict, set or deque held as an attribute by the loader or its telemetry (its waits,
    heartbeat, prefetcher, fetch sketch, and the pipeline's document batches in flight)."""
    owners = {"loader": loader, "waits": loader.waits, "heartbeat": loader.heartbeat, "prefetcher": loader._prefetcher,
              "fetch_s": loader.fetch_s, "recent": loader.pipeline.recent}
    return {f"{name}.{attr}": len(value) for name, owner in owners.items()
            if hasattr(owner, "__dict__") for attr, value in vars(owner).items()
            if isinstance(value, (list, dict, set, deque))}


def test_a_loaders_telemetry_does_not_grow_with_its_steps():
    """Nothing a loader keeps for its stats grows per step: every container of its telemetry has the same size after
    5,000 and after 20,000 steps, but those bounded by design, which stay within their bounds: the prefetcher's
    timeline, the rolling window, the waits by stage, the fetch sketch's buckets, the document batches in flight. A list of every fetch or queue
    fill would have grown by 15,000; the stats still cover every step."""
    cfg = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=16, batch_size=1)
    in_flight = cfg.queue_depth + 2 * effective_threads(cfg) + 2  # document batches queued, encoding and packing
    bounded = {"prefetcher.produced": KEEP_PRODUCED, "heartbeat._rolling": ROLLING_WINDOW, "recent._held": in_flight, "waits.stall_s": len(STAGES),
               "waits.first_s": len(STAGES), "fetch_s.buckets": MAX_BUCKETS}
    with FineWebLoader(cfg) as loader:
        for _ in range(5_000):
            loader.next_batch()
        early = _kept(loader)
        for _ in range(15_000):
            loader.next_batch()
        late = _kept(loader)
        stats = loader.stats()
    assert {key: size for key, size in late.items() if key not in bounded} == {
        key: size for key, size in early.items() if key not in bounded}
    assert all(late[key] <= bound for key, bound in bounded.items() if key in late), late
    assert "fetch_s.buckets" in late and "prefetcher.produced" in late  # the walk reaches the structures that count
    assert stats["steps"] == loader.fetch_s.count == 20_000 and stats["fetch_max_ms"] > 0
    assert 0 <= stats["mean_queue_fill"] <= cfg.queue_depth

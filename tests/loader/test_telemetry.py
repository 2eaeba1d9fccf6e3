"""Heartbeat files in the users' format; warmup reporting; progress every report_docs documents."""

import orjson
import pytest

from fwe_cli.loader import FineWebLoader, SourceError, resolve_config

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



@pytest.mark.parametrize("n", [1, 2, 3, 20, 1001])
def test_percentiles_match_numpys_linear_method(n):
    """percentiles_ms (plain Python) gives numpy's default (linear) percentiles, in ms, and the max."""
    import random

    import numpy as np

    from fwe_cli.loader.telemetry import percentiles_ms

    values = [random.Random(n).expovariate(50.0) for _ in range(n)]
    got = percentiles_ms(values)
    want = np.percentile(np.asarray(values) * 1000.0, [50, 95, 99])
    assert [got["p50"], got["p95"], got["p99"]] == pytest.approx([round(float(v), 4) for v in want], abs=1e-4)
    assert got["max"] == pytest.approx(max(values) * 1000.0, abs=1e-4)

"""`python -m scripts.bench.throughput` runs end to end on a small synthetic corpus: every stage it ran hashes to the
same id stream, and the JSON carries the figures and verdicts the issue asks for (no speed is asserted here)."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_benchmark_runs_and_stages_agree_on_ids(tmp_path):
    """2 MB of synthetic records (about 48 batches: what the bench's steady-state window needs, with margin), one
    round, naive + ceiling + fwe, each stage to the end of the data (no time limit: how far a stage stopped after a
    few seconds gets depends on the machine's load, and a stage stopped too early leaves the comparison): exit 0,
    identical id streams, every figure."""
    cmd = [sys.executable, "-m", "scripts.bench.throughput", "--synthetic", "--min-mb", "2", "--rounds", "1",
           "--skip", "datasets,rss", "--slow-stage-seconds", "0", "--data-dir", str(tmp_path / "data"),
           "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert report["ids_identical"] == {"prefix": True, "whole_stream": True,
                                       "stages_compared": ["ceiling", "fwe", "naive"]}
    assert report["data"].startswith("synthetic") and report["data_mb"] >= 2
    assert set(report["acceptance"]) == {"fwe_vs_ceiling", "fwe_vs_naive"}
    fwe = report["rounds"][0]["fwe"]
    assert fwe["loader"]["tokenizer"]["backend"] in ("tiktoken", "tokenizers") and fwe["tokens"] > 0
    assert {"steady_tokens_per_s", "first_batch_s", "fetch_p95_ms", "end_to_end_tokens_per_s"} <= set(fwe)
    assert report["summary"]["ceiling_method"].startswith("tiktoken")

"""`python -m scripts.bench.reader_share` runs end to end on a small test Hub and a small local file: every reader of
every world is measured, the readers of a world are together sent about what one reader of the whole epoch is, each
less, and the result names its targets; no speed or ratio target is asserted here (a small Hub has few row groups)."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_reader_share_bench_measures_every_reader_of_each_world(tmp_path):
    """4 MB over 4 files, 2 MB of local JSONL, one rep: exit 0; W = 1, 3, 8 on the Hub and 1, 8 locally, each reader
    with its bytes and CPU; each reader of 3 or 8 sent less than the one reader, all of them together at most 2x
    it; the acceptance block names every target."""
    cmd = [sys.executable, "-m", "scripts.bench.reader_share", "--mb", "4", "--files", "4", "--rows", "250",
           "--local-mb", "2", "--synthetic", "--reps", "1", "--data-dir", str(tmp_path / "data"),
           "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    hub, local = report["runs"]["hub"], report["runs"]["local"]
    assert [len(hub[w]) for w in ("1", "3", "8", "dataloader_3")] == [1, 3, 8, 1] and len(local["8"]) == 8
    one = hub["1"][0]["parquet_bytes"]
    for w in ("3", "8"):
        sent = [r["parquet_bytes"] for r in hub[w]]
        assert all(0 < b < one for b in sent) and one <= sum(sent) <= 2 * one  # (footers, cut row groups)
        assert sum(r["docs"] for r in hub[w]) == hub["1"][0]["docs"]
    assert sum(r["docs"] for r in local["8"]) == local["1"][0]["docs"]
    assert set(report["acceptance"]) == set(report["targets"]) and all("ok" in a for a in report["acceptance"].values())

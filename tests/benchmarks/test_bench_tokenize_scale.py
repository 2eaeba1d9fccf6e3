"""`python -m scripts.bench.tokenize_scale` runs end to end on a small synthetic corpus: every split run it times
merges into the 1-task run's shards, and the figures have their shape; no speed is asserted here."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_tokenize_scale_times_split_runs_that_merge_into_the_one_task_shards(tmp_path):
    """2 MB of synthetic records in 4 files, one rep: exit 0, a contender per process count (1, 2 and the usable
    cores, deduplicated) each reporting tokens/s per core, and every merged output holding the 1-task run's
    shards."""
    cmd = [sys.executable, "-m", "scripts.bench.tokenize_scale", "--synthetic", "--mb", "2", "--files", "4",
           "--reps", "1", "--shard-tokens", "25000", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert report["bench"] == "tokenize_scale" and report["corpus"]["kind"].startswith("synthetic")
    tasks = {name: entry for name, entry in report["contenders"].items() if name.startswith("tasks_")}
    assert sorted(entry["processes"] for entry in tasks.values()) == sorted({1, min(2, report["cores"]),
                                                                              report["cores"]})
    assert report["all_same_shards"] is True and tasks["tasks_1"]["scaling_efficiency"] == 1.0
    for entry in report["contenders"].values():
        assert entry["tokens_per_s_per_core"] > 0 and entry["tokens"] == tasks["tasks_1"]["tokens"] > 0
        assert len(entry["task_tokens_per_s"][0]) == entry["processes"]

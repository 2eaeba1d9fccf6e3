"""`python -m scripts.bench.memory` runs end to end at tiny sizes: a fresh loader process and a fresh `fwe smoke` per
batch count, each pulling all its batches, with a peak RSS of its own and the growth between the counts; no memory
figure is asserted here."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_memory_bench_measures_each_contender_at_each_count(tmp_path):
    """--batches 50,400, one rep: exit 0, every run ok with a positive peak, growth = the larger count's peak less the
    smaller's, and the verdict follows the 5 MB limit."""
    cmd = [sys.executable, "-m", "scripts.bench.memory", "--batches", "400,50", "--reps", "1", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert report["bench"] == "memory" and report["settings"]["batches"] == [50, 400]
    assert report["all_runs_ok"] is True and report["growth_limit_mb"] == 5.0
    assert set(report["contenders"]) == {"loader", "smoke"}
    assert "smoke --source synthetic --tokenizer byte --seq-len 16 --batch 1 --batches 400" in report["commands"]["smoke"]
    for entry in report["contenders"].values():
        assert set(entry["peak_rss_mb"]) == set(entry["runs"]) == {"50", "400"}
        for runs in entry["runs"].values():
            assert len(runs) == 1 and runs[0]["ok"] is True and runs[0]["rc"] == 0 and runs[0]["peak_rss_mb"] > 0
        peaks = {n: entry["peak_rss_mb"][n]["median"] for n in ("50", "400")}
        assert entry["growth_mb"] == round(peaks["400"] - peaks["50"], 2)
    assert report["pass"] == all(e["growth_mb"] <= 5.0 for e in report["contenders"].values())

"""`python -m scripts.bench.mix` runs end to end on a small synthetic corpus: the contenders read the same three
files, the mix realizes its weights, the scheduled mix its stages, and the result holds the ratios and the schedule's
share gaps; no speed or accuracy is asserted here (a few dozen steps of long documents are no measure of either)."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_mix_bench_compares_a_mix_of_three_with_one_source_of_the_same_text(tmp_path):
    """2 MB of synthetic records, 40 batches, one rep: exit 0, a tokens/s figure for each contender and their ratios,
    the mix's three sources each near a third of the tokens, the scheduled mix's stages where its schedule puts them
    (a quarter and three quarters of the batches), and a share gap for 1 rank and each of 3."""
    cmd = [sys.executable, "-m", "scripts.bench.mix", "--synthetic", "--min-mb", "2", "--batches", "40", "--reps", "1",
           "--accuracy-steps", "40", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert report["bench"] == "mix" and report["data"].startswith("synthetic")
    assert report["tokens_per_s"]["single"]["median"] > 0 and report["tokens_per_s"]["mix"]["median"] > 0
    assert report["mix_vs_single"] > 0
    shares = [s["tokens"] for s in report["mix_sources"]]
    assert len(shares) == 3 and all(abs(s / sum(shares) - 1 / 3) < 0.05 for s in shares)
    assert report["tokens_per_s"]["scheduled"]["median"] > 0 and report["scheduled_vs_fixed"] > 0
    assert [stage["steps"] for stage in report["scheduled_sources"][0]["stages"]][:2] == [[0, 10], [10, 30]]
    readers = report["schedule_shares"]["readers"]
    assert [(r["world"], r["rank"]) for r in readers] == [(1, 0), (3, 0), (3, 1), (3, 2)]
    assert all(0 <= r["stage_gap"] < 1 and 0 <= r["ramp_tenth_gap"] < 1 for r in readers)

"""`python -m scripts.bench.mix` runs end to end on a small synthetic corpus: both contenders read the same three
files, the mix realizes its weights, and the result holds the ratio; no speed is asserted here."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_mix_bench_compares_a_mix_of_three_with_one_source_of_the_same_text(tmp_path):
    """1 MB of synthetic records, 40 batches, one rep: exit 0, a tokens/s figure for each contender and their ratio,
    and the mix's three sources each near a third of the tokens."""
    cmd = [sys.executable, "-m", "scripts.bench.mix", "--synthetic", "--min-mb", "2", "--batches", "40", "--reps", "1",
           "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert report["bench"] == "mix" and report["data"].startswith("synthetic")
    assert report["tokens_per_s"]["single"]["median"] > 0 and report["tokens_per_s"]["mix"]["median"] > 0
    assert report["mix_vs_single"] > 0
    shares = [s["tokens"] for s in report["mix_sources"]]
    assert len(shares) == 3 and all(abs(s / sum(shares) - 1 / 3) < 0.05 for s in shares)

"""`python -m scripts.bench.packing` runs end to end on a small synthetic corpus: both packings at each row length,
the JSON with each one's crop share, the ratios and the verdict (no speed is asserted here), every row starting at
a document."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_benchmark_runs_and_reports_each_packings_crop(tmp_path):
    """Synthetic records, 10 batches of 8 x 1024 and 8 x 2048, one rep, and best-fit with a buffer of 50 too: exit 0,
    best-fit crops less than greedy at both lengths, every run's rows start at documents, the verdict is given."""
    cmd = [sys.executable, "-m", "scripts.bench.packing", "--synthetic", "--min-mb", "6", "--reps", "1", "--batches",
           "10", "--seq-lens", "1024,2048", "--buffers", "50", "--data", str(tmp_path / "data"), "--out",
           str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert report["bench"] == "packing" and report["data"].startswith("synthetic")
    assert set(report["runs"]) == {"greedy_1024", "best-fit_1024", "greedy_2048", "best-fit_2048",
                                   "best-fit_2048_buffer50"}
    for t in ("1024", "2048"):
        figures = report["by_seq_len"][t]
        assert 0 < figures["crop_best_fit"] < figures["crop_greedy"] < 1 and figures["time_ratio"] > 0
    assert all(run["rows_start_at_documents"] for run in report["runs"].values())
    assert report["acceptance"]["seq_len"] == 2048 and isinstance(report["acceptance"]["pass"], bool)

"""`python -m scripts.bench.plan_scale` runs end to end: a figure for every shape, in order and shuffled, for a
re-deal at 1,024 x 8, and a state's size over 2,000 files (under 8 KB: a size, not a time, is asserted)."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_plan_scale_bench_reports_every_shape_and_the_state(tmp_path):
    """One rep: exit 0; plans of sample-10BT, its row groups and the full listing, each in order and shuffled; a
    re-deal; a state over 2,000 files smaller than 8 KB; the acceptance block."""
    proc = subprocess.run([sys.executable, "-m", "scripts.bench.plan_scale", "--reps", "1", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert set(report["plan"]) == {f"{name}{suffix}" for name in ("sample-10BT", "row-groups", "full")
                                   for suffix in ("", "-shuffled")}
    assert report["plan"]["row-groups"]["units"] == 9_688 and report["replan"]["full-shuffled"]["old_readers"] == 8192
    assert report["state"]["files"] == 2_000 and report["state"]["bytes"] < 8 * 1024
    assert set(report["acceptance"]) == {"plan_s", "state_bytes", "state_s"}

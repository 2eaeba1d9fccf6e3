"""`python -m scripts.bench.object_store` runs end to end at a tiny size: every figure is there (first batches cold and
warm against datasets' streaming, steady tokens/s against local disk, W = 8 readers' bytes and requests, the upload
against s3fs put), and the upload killed half way resumes without sending a recorded piece again, the bucket's parts
whole (an invariant, not a speed: speeds are the benchmark's to report)."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_object_store_bench_reports_every_figure_and_a_killed_upload_resends_nothing_recorded(tmp_path):
    """One rep at 1 MB behind a 5 ms round trip: exit 0; first-batch runs of fwe and datasets, cold and warm; steady
    figures for s3 and local; eight readers' shares; upload timings of both; the killed upload's resume sent none of
    the pieces recorded before the kill and left every part whole; the acceptance block names every target."""
    proc = subprocess.run([sys.executable, "-m", "scripts.bench.object_store", "--mb", "1", "--files", "2", "--reps",
                           "1", "--steady", "2", "--rtt-ms", "5", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = orjson.loads(Path(proc.stdout.strip().splitlines()[-1]).read_bytes())
    for state in ("cold", "warm"):
        assert len(report["first_batch"][state]["fwe_s"]) == len(report["first_batch"][state]["datasets_s"]) == 1
    assert report["steady"]["s3"] > 0 and report["steady"]["local"] > 0
    assert report["steady"]["per_cpu_s"]["s3"] > 0 and report["steady"]["per_cpu_s"]["local"] > 0
    readers = report["readers_w8"]["readers"]
    assert len(readers) == 8 and all(r["bytes"] > 0 and r["requests"] > 0 for r in readers)
    upload = report["upload"]
    assert len(upload["fwe_s"]) == len(upload["s3fs_put_s"]) == 1
    killed = upload["killed"]
    assert killed["recorded_sent_again"] == 0 and killed["whole"]
    assert killed["sent_on_resume"] == killed["pieces"] - killed["recorded_at_kill"]  # in flight at the kill: again
    assert set(report["acceptance"]) == {"first_batch_cold", "first_batch_warm", "steady_vs_local",
                                         "steady_per_cpu_s_vs_local", "reader_share_w8", "upload_vs_s3fs_put",
                                         "killed_upload_recorded_sent_again"}

"""`python -m scripts.bench.token_path` runs end to end on a small synthetic corpus: the token directory it measures
is made by fwe's own tokenize run, and the loader reading it serves exactly the ceiling's id stream (ids + eos per
document, over the first 256 batches or the whole corpus where it holds fewer); no speed is asserted here."""

import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import REPO_ROOT


def test_token_path_serves_the_ceilings_ids_from_fwes_own_token_directory(tmp_path):
    """3 MB of synthetic records (about 70 batches, every one compared), one round, two epochs: exit 0, the same ids
    as the ceiling, a complete token directory holding every token of the corpus, and the figures' shape."""
    cmd = [sys.executable, "-m", "scripts.bench.token_path", "--synthetic", "--min-mb", "3", "--rounds", "1",
           "--epochs", "2", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = orjson.loads(Path(proc.stdout.strip()).read_bytes())
    assert report["bench"] == "token_path" and report["corpus"]["kind"].startswith("synthetic")
    assert report["same_ids_as_ceiling"] is True
    assert report["token_dir"]["tokens"] == report["corpus"]["tokens"]
    assert report["compared_batches"] == min(256, report["corpus"]["tokens"] // (1024 * 8)) >= 32
    manifest = orjson.loads((tmp_path / "work" / "tokens" / "manifest.json").read_bytes())
    assert manifest["complete"] is True and len(manifest["shards"]) == report["token_dir"]["shards"] >= 1
    assert report["token_path"]["steady_tokens_per_s"] > 0 and report["ceiling"]["tokens_per_s"] > 0
    first = report["first_batch_warm"]
    assert len(first) == 3 and all(0 < f["loader_first_batch_s"] <= f["process_to_first_batch_s"] for f in first)

"""A native Hub start never imports huggingface_hub's HTTP stack (httpx, file_download) before its first batch, and a
warm one, on the cached listing, tokenizer and head cache alone, not pyarrow either: those imports cost more CPU than
the rest of a warm open. Each start is a fresh sealed process (`python -m tests.hubsim.first_batch_imports`)."""

from __future__ import annotations

import subprocess
import sys

import orjson

from tests.helpers import REPO_ROOT
from tests.hubsim.fixtures import HubRun


def first_batch(run: HubRun, home) -> dict:
    env = dict(run.env(home), PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run([sys.executable, "-m", "tests.hubsim.first_batch_imports"], capture_output=True, env=env,
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return orjson.loads(proc.stdout)


def test_warm_start_imports_no_parquet_decoder_or_http_client_before_its_first_batch(hubsim_server, tmp_path):
    """Cold, the first batch needs pyarrow (the probe sees it) but not huggingface_hub's client: the listing, the
    range reads and the tokenizer.json go through fwe's own HTTP; warm, in the same HF_HOME, it needs neither: the
    rows come decoded from the head cache and the one request is a plain HEAD."""
    run = HubRun(hubsim_server, tmp_path)
    home = run.new_home()
    cold = first_batch(run, home)
    warm = first_batch(run, home)
    violations = run.violations()
    run.close()
    assert cold["heavy"] == ["pyarrow"]
    assert warm["heavy"] == []
    assert warm["head_cache"]["hits"] >= 1
    assert violations == []

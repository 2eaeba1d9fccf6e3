"""A warm native Hub start reaches its first batch on the cached listing, tokenizer and head cache alone: it imports
neither pyarrow nor huggingface_hub's HTTP stack (httpx, file_download), whose imports cost more CPU than the rest of
a warm open. Each start is a fresh sealed process (`python -m tests.hubsim.first_batch_imports`)."""

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
    """Cold, the first batch needs pyarrow and huggingface_hub's client (the probe sees them; the tokenizer.json
    comes through fwe's own GET, without huggingface_hub's download module); warm, in the same HF_HOME, it needs
    neither: the rows come decoded from the head cache and the one request is a plain HEAD."""
    run = HubRun(hubsim_server, tmp_path)
    home = run.new_home()
    cold = first_batch(run, home)
    warm = first_batch(run, home)
    violations = run.violations()
    run.close()
    assert "pyarrow" in cold["heavy"] and {"httpx", "httpx2"} & set(cold["heavy"])
    assert "huggingface_hub.file_download" not in cold["heavy"]
    assert warm["heavy"] == []
    assert warm["head_cache"]["hits"] >= 1
    assert violations == []

"""Both Hub readers resume exactly in fresh processes: `fwe smoke --save-state` after 2 batches, then a new process
with `--resume-state` for 3 more, gives the batches of one 5-batch run, byte for byte, also when the branch moved in
between (the state names the commit read, and the resume reads that commit). Each run is a sealed subprocess
against the test Hub (`datasets` reads HF_ENDPOINT once, at import)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import orjson
import pytest

from tests.helpers import REPO_ROOT
from tests.hubsim.fixtures import HubRun


def smoke(run: HubRun, home, workdir, *args: str) -> subprocess.CompletedProcess:
    env = dict(run.env(home), PYTHONPATH=str(REPO_ROOT))
    command = [sys.executable, "-m", "fwe_cli", "smoke", "--source", "hub", "--tokenizer", "byte", "--seq-len", "1024",
               "--batch", "4", "--artifacts-dir", str(workdir / "artifacts"), *args]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("reader", ["native", "datasets"])
def test_hub_reader_resumes_exactly_in_a_fresh_process(moving_hub, tmp_path, reader):
    """Whole run == first 2 batches + 3 resumed (with another Q and doc batch) after `main` moved to a commit whose
    stream starts elsewhere: the state names the reader and the commit it read, and the resume reads that commit."""
    run = moving_hub
    home = run.new_home()
    common = ("--hub-reader", reader)
    smoke(run, home, tmp_path, *common, "--batches", "5", "--save-batches", str(tmp_path / "all.npz"))
    state = tmp_path / "state.json"
    smoke(run, home, tmp_path, *common, "--batches", "2", "--save-state", str(state), "--save-batches",
          str(tmp_path / "a.npz"))
    read, now = run.move_main()
    smoke(run, home, tmp_path, *common, "--batches", "3", "--resume-state", str(state), "--q", "6", "--doc-batch",
          "5", "--save-batches", str(tmp_path / "b.npz"))
    whole = np.load(tmp_path / "all.npz")["batches"]
    halves = np.concatenate([np.load(tmp_path / "a.npz")["batches"], np.load(tmp_path / "b.npz")["batches"]])
    assert whole.shape == (5, 4, 1024) and np.array_equal(whole, halves)
    saved = orjson.loads(state.read_bytes())
    source = saved["matching"]["source"]
    assert source["hub_reader"] == reader and source["revision"] == read != now
    assert run.violations() == []

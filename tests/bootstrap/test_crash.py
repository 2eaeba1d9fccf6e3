"""Crash safety of `fwe bootstrap`: SIGKILL, Ctrl-C and a full disk each leave a state that a re-run of the same
command completes byte-identically (per-file sha256) to an uninterrupted run.

Only the interrupted runs that a process has to live through (kill -9, SIGINT) run in a process of their own;
the re-runs and the disk-full runs go through the command in this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.bootstrap.support import SYNTH, assert_same_output, cli, core_run, killed_then_rerun, manifest_of
from tests.helpers import fwe_env


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run every interrupted one must end up identical to (3 parts of ~3 MB)."""
    out = tmp_path_factory.mktemp("ref") / "out"
    core_run(out, source="synthetic", seed=3, gb=0.008, file_mb=3)
    return out


def _records_into_part_1(reference: Path, nbytes: int) -> int:
    """How many records in, counted from the start, the stream is `nbytes` into part 1."""
    part0 = manifest_of(reference)["files"][0]["lines"]
    total, count = 0, 0
    for line in (reference / "part-00001.jsonl").read_bytes().splitlines(keepends=True):
        total += len(line)
        count += 1
        if total >= nbytes:
            return part0 + count
    raise AssertionError("part 1 of the reference is too small")


@pytest.mark.parametrize("point, checkpoint_mb", [
    ("record", "100"),           # mid-part, only part boundaries checkpointed: written chunks after it get replayed
    ("part-fsynced:1", "1.2"),   # part 0 complete and fsynced under its temporary name, not renamed
    ("part-renamed:2", "1.2"),   # part 1 renamed to its final name, manifest not updated yet
    ("manifest-tmp:3", "1.2"),   # a mid-part checkpoint written by the writer thread, not renamed yet
])
def test_sigkill_then_rerun_is_byte_identical(tmp_path, reference, point, checkpoint_mb):
    """Killed with SIGKILL at a point of the write protocol, the same command re-run completes the output
    byte-identical, file by file, to an uninterrupted run, and leaves no temporary files."""
    if point == "record":
        point = f"record:{_records_into_part_1(reference, int(2.5 * 2**20))}"
    out = tmp_path / "out"
    args = (*SYNTH, "--out", str(out), "--checkpoint-mb", checkpoint_mb)
    before, done = killed_then_rerun(point, out, *args, tmp=tmp_path)
    result = orjson.loads(done.stdout)
    assert result["outcome"] == "target reached" and result["resumed_from_bytes"] == before["resume"]["bytes"]
    if point.startswith("record"):  # ~1.5 MiB of records went to disk after the checkpoint and were kept
        assert result["replayed_records"] > 0
    assert_same_output(out, reference)


def test_sigkill_from_outside_at_an_arbitrary_moment(tmp_path, reference):
    """A real kill -9 from another process, while parts are being written, is recovered the same way."""
    out = tmp_path / "out"
    args = (*SYNTH, "--out", str(out), "--checkpoint-mb", "0.7")
    proc = _spawn(args, tmp_path)
    _wait_for(out / "part-00001.jsonl.partial", proc)
    proc.kill()
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert manifest_of(out)["complete"] is False
    done = cli(*args, tmp=tmp_path)
    assert done.exit_code == 0, done.stderr
    assert_same_output(out, reference)


def test_ctrl_c_saves_a_resume_point_and_exits_130(tmp_path, reference):
    """SIGINT stops at a record boundary with a saved resume point (exit 130, a message saying to re-run);
    the re-run finishes identical to the uninterrupted run. The signal is sent by the run itself at its 1500th
    record (FWE_TEST_SIGINT_AT), through the real handler, so it never races the run's end."""
    out = tmp_path / "out"
    args = (*SYNTH, "--out", str(out))
    proc = _spawn(args, tmp_path, {"FWE_TEST_SIGINT_AT": "record:1500"})
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "re-run the same command" in stderr
    manifest = manifest_of(out)
    assert manifest["complete"] is False and manifest["resume"]["part"] >= 1
    assert manifest["runs"][-1]["outcome"] == "interrupted"
    done = cli(*args, tmp=tmp_path)
    assert done.exit_code == 0, done.stderr
    assert_same_output(out, reference)


def test_disk_full_is_clear_and_resumable(tmp_path, reference):
    """ENOSPC in the middle of part 1 (injected: the write that crosses the limit writes what fits, as a full disk
    does) exits 5 with a message naming the cause and the way out; the torn record is rewritten on resume,
    the intact ones after the checkpoint are kept, and the output ends identical."""
    out = tmp_path / "out"
    args = (*SYNTH, "--out", str(out), "--checkpoint-mb", "100")
    full = cli(*args, tmp=tmp_path, env={"FWE_TEST_ENOSPC_AFTER_BYTES": "5500000"})
    assert full.exit_code == 7, full.stderr
    assert "disk full" in full.stderr and "re-run the same command to resume" in full.stderr
    assert os.path.getsize(out / "part-00001.jsonl.partial") == 5_500_000 - manifest_of(reference)["files"][0]["bytes"]
    done = cli(*args, "--json", tmp=tmp_path)
    assert done.exit_code == 0, done.stderr
    result = orjson.loads(done.stdout)
    assert result["replayed_records"] > 0, "records on disk after the checkpoint should have been kept"
    assert result["discarded_bytes"] > 0, "the torn last record should have been cut off"
    assert_same_output(out, reference)


def test_disk_full_artifact_records_the_error(tmp_path):
    """A failed run still writes its artifact, with the error type and message."""
    out = tmp_path / "out"
    failed = cli(*SYNTH, "--out", str(out), tmp=tmp_path, env={"FWE_TEST_ENOSPC_AFTER_BYTES": "100000"})
    assert failed.exit_code == 7, failed.stderr
    (artifact,) = (tmp_path / "artifacts" / "bootstrap").glob("*.json")
    record = orjson.loads(artifact.read_bytes())
    assert record["ok"] is False and record["error"]["type"] == "DiskSpaceError"
    assert record["error"]["message"].startswith(f"disk full while writing {out}")


def _spawn(args, tmp_path, faults: dict | None = None) -> subprocess.Popen:
    """`fwe bootstrap ARGS` started in its own process, not waited for (to be killed from outside, or signalled)."""
    return subprocess.Popen([sys.executable, "-m", "fwe_cli", "bootstrap", *args, "--artifacts-dir",
                             str(tmp_path / "artifacts")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=fwe_env(**(faults or {})))


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"bootstrap ended (rc {proc.returncode}) before {path.name} appeared: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path.name} did not appear within {timeout} s")
        time.sleep(0.005)

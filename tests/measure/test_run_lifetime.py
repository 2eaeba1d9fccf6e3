"""A measured run (the `fwe_cli.measure.child` process) never outlives the `fwe measure` / `fwe tune` that started
it, and the faults around those commands end in one line with the documented exit code.

The interrupt and kill tests need real processes: the command runs in its own interpreter, the test waits (on a
condition, with a bound) until its first run is loading data, then signals the command and watches the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import REPO_ROOT, invoke

LONG = ("--steps", "10000000", "--source", "synthetic", "--tokenizer", "byte")
COMMANDS = {
    "measure": ("measure", "--warm", *LONG),
    "tune": ("tune", "--doc-batch-grid", "16,32", "--q-grid", "1", *LONG),
}
BOUND_S = 60.0


def _until(condition, what: str, proc: subprocess.Popen | None = None, bound: float = BOUND_S):
    """Poll `condition` until it returns something truthy (returned); fail after `bound` s or if `proc` ends."""
    deadline = time.monotonic() + bound
    while True:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the command ended (rc {proc.returncode}) before {what}: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {bound:g} s")
        time.sleep(0.01)


def _start(command: str, tmp_path: Path) -> tuple[subprocess.Popen, psutil.Process]:
    """Start `fwe COMMAND` with a run that would take many minutes; return it and its run once that run is
    loading data (its heartbeat file exists, so the run is past its own start-up)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSA_FWE_", "FWE_TEST_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "fwe_cli", *COMMANDS[command], "--artifacts-dir",
                             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    parent = psutil.Process(proc.pid)

    def running_child():
        children = [c for c in parent.children() if "fwe_cli.measure.child" in " ".join(c.cmdline())]
        return children[0] if children and list(tmp_path.glob("*/*/*/heartbeat_rank0.jsonl")) else None

    return proc, _until(running_child, "measured run loading data", proc)


def _gone(process: psutil.Process) -> bool:
    """The process has ended (reaped, or a zombie waiting for a reaper that is not its old parent)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_interrupted_command_stops_and_reaps_its_run(tmp_path, command):
    """An interrupt of `fwe measure`/`fwe tune` while a run is in flight: the command exits 130 with `interrupted`
    as its last line and no traceback, and its run process is gone. Sent as SIGTERM, which the `fwe` process turns
    into the KeyboardInterrupt Ctrl-C raises (SIGINT is ignored by a process a non-interactive shell started in the
    background, as a CI runner may start the suite)."""
    proc, run = _start(command, tmp_path)
    proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=BOUND_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted" and "Traceback" not in stderr, stderr
    assert _gone(run)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_run_dies_with_a_killed_command(tmp_path, command):
    """SIGKILL of `fwe measure`/`fwe tune` (no cleanup of its own can run): its run process ends by itself (Linux
    PR_SET_PDEATHSIG, set by the run on itself) instead of running on as an orphan."""
    if not sys.platform.startswith("linux"):
        pytest.fail("PR_SET_PDEATHSIG is Linux-only; this suite runs on Linux")
    proc, run = _start(command, tmp_path)
    proc.kill()
    proc.communicate(timeout=BOUND_S)
    try:
        _until(lambda: _gone(run), "end of the orphaned run")
    finally:
        if not _gone(run):
            run.kill()


def test_run_started_after_its_parent_died_exits_at_once(tmp_path):
    """The race PDEATHSIG leaves open (the parent dies before the run sets it) is closed: a run whose parent pid is
    not the one it was given exits 1 at once, before reading its spec."""
    from fwe_cli.measure.child import PARENT_PID_VAR
    from fwe_cli.measure.cold_warm import CHILD

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), PARENT_PID_VAR: str(os.getpid() + 1_000_000)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "never-read.json")], env=env,
                          capture_output=True, text=True, timeout=BOUND_S)
    assert done.returncode == 1 and done.stderr == ""


@pytest.mark.parametrize("command, extra", [
    ("measure", ("--warm",)), ("tune", ("--doc-batch-grid", "16", "--q-grid", "1", "--repeats", "1")),
])
def test_heartbeat_dir_is_refused_and_not_advertised(tmp_path, command, extra):
    """measure/tune keep each run's heartbeat in its run folder, so --heartbeat-dir is refused (exit 2, one line
    naming the flag, nothing run) rather than silently ignored, and their --help does not list it."""
    afile = tmp_path / "afile"
    afile.write_text("")
    result = invoke(command, *extra, "--steps", "2", "--source", "synthetic", "--artifacts-dir",
                    str(tmp_path / "art"), "--heartbeat-dir", str(afile))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --heartbeat-dir is not taken by fwe " + command), lines
    assert not (tmp_path / "art").exists()
    assert "--heartbeat-dir" not in invoke(command, "--help").stdout
    assert "--heartbeat-dir" in invoke("smoke", "--help").stdout


@pytest.mark.parametrize("command, extra, noun", [
    ("measure", ("--warm",), "runs"), ("tune", ("--doc-batch-grid", "16", "--q-grid", "1", "--repeats", "1"), "trials"),
])
def test_failed_run_line_names_the_file(tmp_path, command, extra, noun):
    """A run that fails on its source ends the command with exit 4 and one error line quoting the first failed run's
    error type and message, so the line names the missing path (brackets in it printed as typed)."""
    missing = tmp_path / "[red]nonexist.jsonl"
    result = invoke(command, *extra, "--steps", "2", "--local-path", str(missing), "--tokenizer", "byte",
                    "--artifacts-dir", str(tmp_path / "art"))
    assert result.exit_code == 4
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert f"{noun} failed; first: SourceError: {missing}: " in errors[0], errors[0]

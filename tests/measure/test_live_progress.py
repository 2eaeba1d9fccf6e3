"""Live progress of `fwe measure` / `fwe tune`: a table that fills run by run on a terminal (checked under a
pseudo-terminal, without screenshots), and nothing of it on a pipe or with --json."""

import os
import re
import subprocess
import sys

import orjson
import pytest

from fwe_cli.cli.live_progress import LiveRuns
from fwe_cli.measure.plan import RunEvent
from tests.helpers import fwe_env

RUN = ("--source", "synthetic", "--tokenizer", "byte", "--steps", "3", "--step-ms", "0")
COMMANDS = {
    "measure": ("measure", "--warm", *RUN),
    "tune": ("tune", "--doc-batch-grid", "16", "--q-grid", "1,2", "--repeats", "1", "--trial-s", "0",
             "--objective", "tokens_per_s", "--source", "synthetic", "--tokenizer", "byte", "--steps", "3"),
}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env() -> dict:
    env = fwe_env(COLUMNS="160", LINES="50", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    return env


def _under_pty(args: list[str]) -> tuple[int, str]:
    """Run `python -m fwe_cli ARGS` with stdout and stderr on a pseudo-terminal; all it wrote, escape codes cut."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fwe_cli", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=_env(), close_fds=True)
    os.close(slave)
    chunks = []
    while True:  # read until the child's end of the terminal closes (EIO), so the child never blocks on a full pty
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=300)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_terminal_shows_a_table_that_fills_run_by_run(command, tmp_path):
    """On a terminal, the live table is redrawn as runs start and end: its caption counts up to every run done, a
    running row appears, and an ETA is shown once a run has finished."""
    code, text = _under_pty([*COMMANDS[command], "--artifacts-dir", str(tmp_path)])
    assert code == 0, text[-2000:]
    counts = [int(n) for n in re.findall(r"(\d+)/2 done · elapsed", text)]
    assert counts and counts[0] == 0 and counts[-1] == 2 and counts == sorted(counts), text[-2000:]
    assert 1 in counts and "running" in text
    assert re.search(r"1/2 done · elapsed [^·]+· ETA \d", text), text[-2000:]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_pipe_and_json_print_no_progress(command, tmp_path):
    """On a pipe, stderr has the final report but no live table (no caption, no ETA, no escape codes); with --json
    stderr carries nothing at all here (only warnings and errors would be there) and stdout one JSON object."""
    args = [sys.executable, "-m", "fwe_cli", *COMMANDS[command], "--artifacts-dir", str(tmp_path)]
    piped = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert "done · elapsed" not in piped.stderr and "ETA" not in piped.stderr and "\x1b[" not in piped.stderr
    assert ("verdict against targets" if command == "measure" else "recommended:") in piped.stderr
    quiet = subprocess.run([*args, "--json"], capture_output=True, text=True, env=_env(), timeout=300)
    assert quiet.returncode == 0 and orjson.loads(quiet.stdout)["exit_code"] == 0
    assert [line for line in quiet.stderr.splitlines() if not line.startswith("warning:")] == []


def test_eta_is_mean_duration_times_runs_left_capped_by_budget(monkeypatch):
    """The ETA: no estimate before a run has finished; then the mean run time times the runs not done (less what
    the running one has used), never past the budget."""
    now = {"t": 0.0}
    monkeypatch.setattr("fwe_cli.cli.live_progress.time.monotonic", lambda: now["t"])
    live = LiveRuns("t", ["run", "x"], lambda record: ["1"], json_out=True, budget_s=25.0)
    live.on_run(RunEvent("start", 0, 4, "a"))
    assert live.eta_s() is None
    now["t"] = 4.0
    live.on_run(RunEvent("done", 0, 4, "a", {"error": None}))
    assert live.eta_s() == 12.0  # 4 s per run x 3 left
    live.on_run(RunEvent("start", 1, 4, "b"))
    now["t"] = 5.0
    assert live.eta_s() == 11.0  # the running one has used 1 s of its 4
    now["t"] = 20.0
    assert live.eta_s() == 5.0  # the budget ends at 25 s
    assert live.enabled is False  # --json: nothing is drawn

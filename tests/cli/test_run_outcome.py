"""A run's outcome is its own object (fwe_cli.cli.invocation.Run), not the process's: the first way out decides it once,
from any thread, and a run after another in the same process starts fresh."""

from __future__ import annotations

import subprocess
import sys
import threading

import orjson
import pytest
import typer

from fwe_cli.cli.invocation import Run
from tests.helpers import REPO_ROOT, fwe_env

# In one process: the `fwe` process's own run (main(), which ends with SystemExit here: a usage error), then a run
# through CliRunner, as a program that embeds fwe would make; what the second run gave its caller goes to argv[1].
TWO_RUNS = """
import sys

import orjson
from typer.testing import CliRunner

from fwe_cli.cli.app import app, main

report, artifacts = sys.argv[1], sys.argv[2]
words = ["smoke", "--source", "synthetic", "--tokenizer", "byte", "--json", "--artifacts-dir", artifacts]
sys.argv = ["fwe", *words, "--seq-len", "0"]
try:
    main()
except SystemExit as exc:
    first = exc.code
second = CliRunner().invoke(app, [*words, "--batches", "1"], catch_exceptions=False)
open(report, "wb").write(orjson.dumps({"first": first, "code": second.exit_code, "stdout": second.stdout}))
"""


def test_a_run_after_the_fwe_process_own_run_starts_fresh(tmp_path):
    """After the `fwe` process's own run (main(): a process it may end at once, early start on) has ended, a run made
    in the same process by another program (CliRunner) is a run of its own: it ends through typer, so its caller
    gets its exit code and its one JSON object, instead of the process ending under it."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-c", TWO_RUNS, str(report), str(tmp_path / "a")], capture_output=True,
                          text=True, env=fwe_env(), cwd=REPO_ROOT, timeout=120)
    assert report.exists(), f"the process ended inside the second run (status {proc.returncode}): {proc.stderr}"
    got = orjson.loads(report.read_bytes())
    assert got["first"] == 2 and got["code"] == 0, got
    second = orjson.loads(got["stdout"])  # exactly one object (orjson refuses trailing data)
    assert second["ok"] is True and second["exit_code"] == 0 and second["batches"] == 1


def test_the_first_way_out_decides_the_outcome_once_from_any_thread(capsysbinary):
    """Eight threads end one --json run at once with different codes (the smoke watchdog racing the command): exactly
    one finish wins, exactly one object is printed, with the winner's code, and a later end of the run (the command
    leaving after the watchdog won) exits with that same code, not its own."""
    run = Run()
    run.ask_json(True, "smoke")
    run.print_json({"batches": 1})
    start = threading.Barrier(8)
    won: list[int] = []

    def finish(code: int) -> None:
        start.wait()
        if run.finish(code, {"batches": 1, "by": code}):
            won.append(code)

    threads = [threading.Thread(target=finish, args=(code,)) for code in range(3, 11)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    printed = orjson.loads(capsysbinary.readouterr().out)  # one object: a second would be trailing data
    assert len(won) == 1 and run.code == won[0] == printed["exit_code"] == printed["by"]
    with pytest.raises(typer.Exit) as ended:
        run.end(0)
    assert ended.value.exit_code == won[0]
    assert capsysbinary.readouterr().out == b""


def test_a_result_held_for_json_is_dropped_once_the_run_has_ended(capsysbinary):
    """A result the command prints after another way out ended the run (the watchdog's object is out) adds nothing:
    stdout keeps the one object; without --json a result is printed at once and finish prints nothing."""
    run = Run()
    run.ask_json(True, "smoke")
    assert run.finish(3, {"error": {"type": "HardTimeout", "message": "late"}})
    run.print_json({"batches": 1})
    assert orjson.loads(capsysbinary.readouterr().out)["exit_code"] == 3
    plain = Run()
    plain.print_json({"batches": 1})
    assert orjson.loads(capsysbinary.readouterr().out) == {"batches": 1}
    assert plain.finish(0) and capsysbinary.readouterr().out == b""

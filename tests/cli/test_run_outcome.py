"""A run's outcome is its own object (fwe_cli.cli.invocation.Run), not the process's: the first way out decides it once,
from any thread, a run after another in the same process starts fresh, and a run inside another program returns to
it, never ends it (a producer it could not join, its watchdog firing)."""

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


# A program that embeds fwe (CliRunner) and runs a smoke on short documents, the read of document argv[3] stuck until the
# run has ended (Run.finish); further words for the smoke follow. What the run gave its caller goes to argv[1].
STUCK_READ = """
import sys
import threading

import orjson
from typer.testing import CliRunner

from fwe_cli.cli.app import app
from fwe_cli.cli.invocation import Run
from fwe_cli.loader.documents import Document
from fwe_cli.loader.files.synthetic import SyntheticSource

report, artifacts, stuck_at, *flags = sys.argv[1:]
release = threading.Event()
read, finish = SyntheticSource.read, Run.finish


def short_documents_one_stuck(self, pieces, at):
    for index, (document, position, anchor) in enumerate(read(self, pieces, at)):
        if index == int(stuck_at):
            release.wait()
        yield Document("one short document. " * 4, document.id), position, anchor


def finish_then_release(self, code, result=None):
    ended = finish(self, code, result)
    release.set()
    return ended


SyntheticSource.read, Run.finish = short_documents_one_stuck, finish_then_release
words = ["smoke", "--source", "synthetic", "--tokenizer", "byte", "--seq-len", "16", "--batch", "1", "--doc-batch", "1",
         "--tokenizer-threads", "1", "--q", "8", "--json", "--artifacts-dir", artifacts, *flags]
result = CliRunner().invoke(app, words, catch_exceptions=False)
open(report, "wb").write(orjson.dumps({"code": result.exit_code, "stdout": result.stdout}))
"""


def _embedded_smoke(tmp_path, stuck_at: int, *flags: str) -> tuple[int, dict]:
    """(exit code, the one JSON object) of STUCK_READ's smoke, which must return to its program."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-c", STUCK_READ, str(report), str(tmp_path / "a"), str(stuck_at), *flags],
                          capture_output=True, text=True, env=fwe_env(), cwd=REPO_ROOT, timeout=120)
    assert report.exists(), f"the process ended inside the run (status {proc.returncode}): {proc.stderr}"
    got = orjson.loads(report.read_bytes())
    return got["code"], orjson.loads(got["stdout"])  # exactly one object (orjson refuses trailing data)


def test_a_run_inside_another_program_returns_to_it_with_a_producer_it_could_not_join(tmp_path):
    """The first short document holds more than the smoke's 3 batches, then the producer's next read is stuck when
    the smoke closes its loader (the join gives up): the run still returns to the program that made it (only the
    `fwe` process itself ends at once), exit 0 and its one object, which reports the producer alive."""
    code, data = _embedded_smoke(tmp_path, 1)
    assert code == 0 and data["ok"] is True and data["batches"] == 3, data
    assert data["loader"]["producer_alive"] is True


def test_a_watchdog_inside_another_program_ends_the_run_not_the_program(tmp_path):
    """--no-prefetch with the first read stuck (in the command's own thread) past --timeout 1: the watchdog ends the
    run, exit 3 with its one HardTimeout object, and the call returns to its program once the read does; the artifact
    is the watchdog's object, not overwritten by the command's late result."""
    code, data = _embedded_smoke(tmp_path, 0, "--no-prefetch", "--timeout", "1")
    assert code == 3 and data["exit_code"] == 3, data
    assert data["error"]["type"] == "HardTimeout" and data["error"]["stage"] == "unknown (watchdog)"
    assert orjson.loads(open(data["artifact"], "rb").read()) == data


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

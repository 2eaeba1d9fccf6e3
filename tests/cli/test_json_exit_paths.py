"""With --json, stdout carries exactly one JSON object on every way a run ends (usage error, fallback, interrupt, a
bug), with `ok`, `exit_code` (equal to the exit status) and `error`; never two objects, never none. In-process through
CliRunner and in the `fwe` process itself (main(), signals). A smoke's timeouts (the loader's deadline, the watchdog's
os._exit) end in one object too (tests/cli/test_smoke_cmd.py), and so does a fallback (tests/loader/
test_hub_unreachable.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import orjson
import pytest

from fwe_cli.cli.exit_codes import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE
from tests.helpers import REPO_ROOT, fwe_env, invoke, one_object, run_fwe

SMOKE = ("smoke", "--source", "synthetic", "--tokenizer", "byte", "--batches", "1")


USAGE = [
    (("smoke", "--seq-len", "0"), "ConfigError"),  # fwe's own range check
    (("smoke", "--seq-len", "abc"), "BadParameter"),  # typer's parsing
    (("smoke", "--source", "nowhere"), "ConfigError"),
    (("measure", "--steps", "0"), "BadParameter"),
    (("measure", "--heartbeat-dir", "x"), "ConfigError"),
    (("tune", "--doc-batch-grid", "1,x"), "ConfigError"),
    (("tune", "--q-grid", "4", "--q", "4"), "ConfigError"),
    (("bootstrap",), "BadParameter"),  # --gb missing
    (("bootstrap", "--out", "x", "--gb", "-1"), "ConfigError"),
    (("doctor", "--hub-timeout", "0"), "BadParameter"),
    (("nosuch",), "UsageError"),
]


@pytest.mark.parametrize("args,kind", USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_a_usage_error_in_process_is_one_error_object(args, kind, tmp_path):
    """A usage error, whether click finds it before the command runs or fwe's own checks do: exit 2 and one object
    {ok false, exit_code 2, error {type, message}, command} naming the command."""
    extra = () if args[0] == "nosuch" else ("--artifacts-dir", str(tmp_path))
    result = invoke(*args, "--json", *extra)
    assert result.exit_code == EXIT_USAGE, result.stderr
    data = one_object(result.stdout, EXIT_USAGE)
    assert data["error"]["type"] == kind and data["command"] == args[0]


PROCESS_USAGE = [
    (("smoke", "--json", "--seq-len", "abc"), "Invalid value for '--seq-len'"),  # typer's parsing; --json first
    (("smoke", "--batches", "0"), "Invalid value for '--batches'"),  # typer's minimum; no --json
    (("smoke", "--seq-len", "0", "--json"), "--seq-len must be an integer from 1"),  # fwe's own range check
    (("measure", "--json", "--repeats", "0"), "Invalid value for '--repeats'"),
    (("bootstrap", "--json"), "--gb is required"),  # a missing option
    (("tune", "--json", "--budget-s", "x"), "Invalid value for '--budget-s'"),
    (("tune", "--doc-batch", "8,64", "--json"), "fwe tune takes --doc-batch-grid"),  # a list for a single value
    (("nosuch",), "No such command 'nosuch'"),  # no --json
]


@pytest.mark.parametrize("args,needle", PROCESS_USAGE, ids=[" ".join(a) for a, _ in PROCESS_USAGE])
def test_a_usage_error_of_the_fwe_process_is_one_line_and_one_error_object(args, needle, tmp_path):
    """In the `fwe` process itself (main(): it reads --json from sys.argv and turns typer's boxed usage panel into one
    line), a value typer rejects, one fwe's own checks reject, a missing option or an unknown command: exit 2, one
    `error:` line on stderr naming it (a list given to tune's single-value --doc-batch names the grid flag that
    sweeps it), and with --json the one error object on stdout (without it, nothing)."""
    extra = () if args[0] == "nosuch" else ("--artifacts-dir", str(tmp_path))
    proc = run_fwe(*args, *extra)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    if "--json" in args:
        one_object(proc.stdout, EXIT_USAGE)
    else:
        assert proc.stdout == ""


def test_json_mode_is_read_from_the_parsed_flags(tmp_path):
    """`fwe smoke --local-path --json`: click gives --local-path the value "--json", so the run is not in JSON mode
    and, whatever it does, stdout holds no JSON object; a second --json after it is the flag, and that run prints its
    one object."""
    args = ("smoke", "--local-path", "--json", "--tokenizer", "byte", "--artifacts-dir", str(tmp_path))
    plain = invoke(*args)
    assert plain.exit_code != 0 and "--json" in plain.stderr  # no file named --json: the one error line names it
    assert not plain.stdout.lstrip().startswith("{"), plain.stdout
    flagged = invoke(*args, "--json")
    data = one_object(flagged.stdout, flagged.exit_code)
    assert data["config"]["source"]["local_path"] == "--json"


def test_without_json_stdout_stays_empty_on_a_usage_error(tmp_path):
    """The object is --json's: a usage error without it prints nothing on stdout."""
    result = invoke("smoke", "--seq-len", "0", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == EXIT_USAGE and result.stdout == ""


def test_help_with_json_is_only_the_help(tmp_path):
    """--help is the output asked for: no JSON object is added after it."""
    result = invoke("smoke", "--json", "--help")
    assert result.exit_code == 0 and "Usage" in result.stdout and "exit_code" not in result.stdout


def test_a_result_is_printed_once_with_its_exit_code(tmp_path):
    """A run that printed its result gets no second object: the result itself carries exit_code (0), and it is the
    artifact."""
    result = invoke(*SMOKE, "--json", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    data = one_object(result.stdout, 0)
    assert data["batches"] == 1 and orjson.loads(open(data["artifact"], "rb").read()) == data


def test_failed_checks_name_the_failure(tmp_path):
    """A smoke whose checks fail (a source too small for one batch): exit 1, the result with an error naming it."""
    path = tmp_path / "tiny.jsonl"
    path.write_text('{"text": "too short"}\n')
    result = invoke("smoke", "--local-path", str(path), "--json", "--artifacts-dir", str(tmp_path))
    data = one_object(result.stdout, 1)
    assert data["error"]["type"] == "CheckFailed" and "batches" in data["error"]["message"]


def test_an_internal_error_is_one_error_object(monkeypatch, tmp_path):
    """A bug (an exception nothing expected): exit 70 and one object whose error is the internal-error line."""
    import fwe_cli.measure.smoke as smoke

    def broken(*args, **kwargs):
        raise TypeError("odd value")

    monkeypatch.delenv("FWE_TRACEBACK", raising=False)
    monkeypatch.setattr(smoke, "SmokeRun", broken)
    result = invoke(*SMOKE, "--json", "--artifacts-dir", str(tmp_path))
    data = one_object(result.stdout, EXIT_INTERNAL)
    assert data["error"]["type"] == "InternalError" and "TypeError: odd value" in data["error"]["message"]


def test_an_interrupt_in_process_is_one_error_object(monkeypatch, tmp_path):
    """Ctrl-C inside a command: exit 130, one object whose error says interrupted."""
    import fwe_cli.measure.smoke as smoke

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(smoke, "SmokeRun", interrupted)
    result = invoke(*SMOKE, "--json", "--artifacts-dir", str(tmp_path))
    data = one_object(result.stdout, EXIT_INTERRUPTED)
    assert data["error"]["type"] == "KeyboardInterrupt" and data["command"] == "smoke"


def test_a_measure_whose_runs_fail_is_its_summary_with_the_error(monkeypatch, tmp_path):
    """measure with a failed run: exit 4, the summary (printed once) with exit_code, ok false and the error."""
    import fwe_cli.measure.cold_warm as cold_warm

    real = cold_warm.run_measure

    def failing(config, plan, out_dir, on_run):
        summary = real(config, plan, out_dir, on_run)
        summary["runs"][0]["error"] = {"type": "RunTimeout", "message": "run did not finish", "stage": None}
        return summary

    monkeypatch.setattr(cold_warm, "run_measure", failing)
    result = invoke("measure", "--warm", "--source", "synthetic", "--tokenizer", "byte", "--steps", "2", "--json",
                    "--artifacts-dir", str(tmp_path))
    data = one_object(result.stdout, 4)
    assert data["error"]["type"] == "RunFailed" and "run did not finish" in data["error"]["message"]
    assert "verdict" in data


def test_an_interrupt_of_a_running_smoke_is_one_error_object(tmp_path):
    """An interrupt to `fwe smoke --json` once its first batch is out (its heartbeat line is on disk): exit 130
    and exactly one object, error KeyboardInterrupt; stderr the one `interrupted` line. Sent as SIGTERM, which the
    `fwe` process turns into the same interrupt as Ctrl-C: SIGINT itself is ignored by a process that a
    non-interactive shell started in the background (a CI runner may), so a test sending it could not count on it."""
    beats = tmp_path / "beats"
    env = fwe_env()
    proc = subprocess.Popen([sys.executable, "-m", "fwe_cli", "smoke", "--source", "synthetic", "--tokenizer", "byte",
                             "--batches", "1000000", "--seq-len", "4096", "--heartbeat-dir", str(beats), "--json",
                             "--artifacts-dir", str(tmp_path / "a")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=REPO_ROOT)
    heartbeat = beats / "heartbeat_rank0.jsonl"
    give_up = time.monotonic() + 120  # a bound on a hung run, not an expected duration
    try:
        while proc.poll() is None and time.monotonic() < give_up and b"fineweb_loader_ready" not in (
                heartbeat.read_bytes() if heartbeat.exists() else b""):
            time.sleep(0.01)  # polling for the condition, a few ms apart so the run gets the CPU
        assert proc.poll() is None and heartbeat.exists(), "the run ended or hung before its first batch"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    data = one_object(out, EXIT_INTERRUPTED)
    assert data["error"]["type"] == "KeyboardInterrupt"
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted"]

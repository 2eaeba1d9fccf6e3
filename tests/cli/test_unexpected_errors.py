"""What a user sees when fwe itself fails or is interrupted: one line and a documented exit code, never a raw
traceback (unless FWE_TRACEBACK=1 asks for it)."""

from __future__ import annotations

import pytest

from fwe_cli.cli.exit_codes import EXIT_INTERNAL, EXIT_INTERRUPTED
from tests.helpers import invoke

SMOKE = ("smoke", "--source", "synthetic", "--tokenizer", "byte", "--batches", "1")


def _raise(exc: BaseException):
    def run(*args, **kwargs):
        raise exc
    return run


@pytest.mark.parametrize("command", ["smoke", "measure"])
def test_an_unexpected_exception_is_one_line_with_the_internal_error_code(monkeypatch, tmp_path, command):
    """A bug (an exception no layer expected) exits 70 with one escaped `error: internal error: ...` line naming the
    exception, and no traceback."""
    import fwe_cli.measure.cold_warm as cold_warm
    import fwe_cli.measure.smoke as smoke

    monkeypatch.delenv("FWE_TRACEBACK", raising=False)
    monkeypatch.setattr(smoke, "SmokeRun", _raise(TypeError("odd [value] here")))
    monkeypatch.setattr(cold_warm, "run_measure", _raise(TypeError("odd [value] here")))
    args = SMOKE if command == "smoke" else ("measure", "--source", "synthetic", "--tokenizer", "byte")
    result = invoke(*args, "--artifacts-dir", str(tmp_path))
    assert result.exit_code == EXIT_INTERNAL, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: internal error: TypeError: odd [value] here (a bug in fwe; FWE_TRACEBACK=1 prints the "
                     "traceback, please report it)"], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_fwe_traceback_shows_the_bug(monkeypatch, tmp_path):
    """With FWE_TRACEBACK=1 the unexpected exception propagates (its traceback is what a bug report needs)."""
    import fwe_cli.measure.smoke as smoke

    monkeypatch.setenv("FWE_TRACEBACK", "1")
    monkeypatch.setattr(smoke, "SmokeRun", _raise(TypeError("odd value")))
    with pytest.raises(TypeError, match="odd value"):
        invoke(*SMOKE, "--artifacts-dir", str(tmp_path))


def test_ctrl_c_outside_bootstrap_is_one_line_and_exit_130(monkeypatch, tmp_path):
    """Ctrl-C during smoke ends it with `interrupted` and exit 130, not a KeyboardInterrupt traceback."""
    import fwe_cli.measure.smoke as smoke

    monkeypatch.setattr(smoke, "SmokeRun", _raise(KeyboardInterrupt()))
    result = invoke(*SMOKE, "--artifacts-dir", str(tmp_path))
    assert result.exit_code == EXIT_INTERRUPTED, result.stderr
    assert result.stderr.strip() == "interrupted"


def test_sigterm_stops_a_smoke_like_ctrl_c(tmp_path):
    """SIGTERM to a running `fwe smoke` ends it as Ctrl-C does: exit 130 and one `interrupted` line, no traceback.
    The signal is sent once the loader's first batch is out (its heartbeat line is on disk)."""
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import REPO_ROOT, fwe_env

    beats = tmp_path / "beats"
    env = fwe_env()
    proc = subprocess.Popen([sys.executable, "-m", "fwe_cli", "smoke", "--source", "synthetic", "--tokenizer", "byte",
                             "--batches", "1000000", "--seq-len", "4096", "--heartbeat-dir", str(beats),
                             "--artifacts-dir", str(tmp_path / "a")], stderr=subprocess.PIPE, text=True, env=env,
                            cwd=REPO_ROOT)
    heartbeat = beats / "heartbeat_rank0.jsonl"
    give_up = time.monotonic() + 120  # a bound on a hung run, not an expected duration
    try:
        # poll for the condition (the first batch's heartbeat line), a few ms apart so the run gets the CPU
        while proc.poll() is None and time.monotonic() < give_up and b"fineweb_loader_ready" not in (
                heartbeat.read_bytes() if heartbeat.exists() else b""):
            time.sleep(0.01)
        assert proc.poll() is None and heartbeat.exists(), "the run ended or hung before its first batch"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted"]

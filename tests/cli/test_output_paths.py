"""Outputs that cannot be written (symptom 8) and paths that look like rich markup (symptom 9).

Paths that fail: a missing folder, a path under a regular file (ENOTDIR: works when the tests run as root, where
chmod blocks nothing), a write that fails at the end. Each is one line naming the path and the operation, exit 8
(7 for a full disk), never a traceback.
"""

import errno
import importlib.util

import orjson
import pytest

from fwe_cli.errors import OutputError
from fwe_cli.loader.pipeline.telemetry import Heartbeat
from tests.helpers import invoke, write_jsonl

# rich would read [red] and [/] as markup and drop [torch] as an unknown tag; as a path it is two folders, "[red]x["
# and "]-[torch]"
MARKUP = "[red]x[/]-[torch]"


def _one_line_output_error(result, code: int, *needles: str) -> str:
    assert result.exit_code == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert lines and lines[-1].startswith("error: cannot "), result.stderr
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])
    return lines[-1]


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("case", ["missing folder", "under a file", "a folder"])
def test_save_batches_that_cannot_be_written_fails_before_the_run(case, tmp_path, a_file):
    """Symptom 8: --save-batches into a missing folder, under a regular file or onto a folder exits 8 in one line
    naming the path and the operation, before any batch is pulled (no artifact)."""
    target = {"missing folder": tmp_path / "missing" / "b.npz", "under a file": a_file / "b.npz",
              "a folder": tmp_path}[case]
    result = invoke("smoke", "--source", "synthetic", "--save-batches", str(target),
                    "--artifacts-dir", str(tmp_path / "art"))
    line = _one_line_output_error(result, 8, "save batches to", str(target))
    assert len(result.stderr.strip().splitlines()) == 1, line
    assert not list((tmp_path / "art").rglob("*.json"))


@pytest.mark.parametrize("command", ["smoke", "measure", "tune"])
@pytest.mark.parametrize("where", ["is a file", "under a file"])
def test_artifacts_dir_that_is_a_file_fails_before_the_run(command, where, a_file):
    """Symptom 8: --artifacts-dir that is a regular file (or lies under one) exits 8 in one line naming it, before
    any run: every command checks its output folder first."""
    artifacts = a_file if where == "is a file" else a_file / "sub"
    result = invoke(command, "--source", "synthetic", "--artifacts-dir", str(artifacts))
    _one_line_output_error(result, 8, "cannot write to", str(artifacts), "not a directory")
    assert len(result.stderr.strip().splitlines()) == 1


def test_heartbeat_dir_that_is_a_file_fails_in_one_line(tmp_path, a_file):
    """Symptom 8: --heartbeat-dir that is a regular file exits 8 in one line naming it, not a FileExistsError."""
    result = invoke("smoke", "--source", "synthetic", "--heartbeat-dir", str(a_file),
                    "--artifacts-dir", str(tmp_path))
    _one_line_output_error(result, 8, "write heartbeat to", str(a_file))


@pytest.mark.parametrize("err, code", [(errno.EACCES, 8), (errno.EROFS, 8), (errno.ENOSPC, 7)])
def test_artifact_write_failing_at_the_end_is_one_line(err, code, tmp_path, monkeypatch):
    """Symptom 8: an artifacts folder that stops taking files after the checks (unwritable, read-only, full) ends
    with one line naming the artifact path: exit 8, or 7 for a full disk; never an OSError traceback."""
    import fwe_cli.artifacts as artifacts

    def refuse(path, data):
        raise OSError(err, "refused by the test")

    monkeypatch.setattr(artifacts, "write_atomic", refuse)
    result = invoke("smoke", "--source", "synthetic", "--artifacts-dir", str(tmp_path))
    _one_line_output_error(result, code, "cannot write", str(tmp_path / "smoke"), errno.errorcode[err])


def test_save_failing_at_the_write_is_recorded_and_exits_8(tmp_path, monkeypatch):
    """Symptom 8: when saving the batches fails at the write itself, the artifact still records the run (ok false,
    the error naming the path) and the command exits 8 in one line."""
    import fwe_cli.measure.smoke as smoke

    def refuse(path, data):
        raise OSError(errno.EROFS, "read-only file system")

    monkeypatch.setattr(smoke, "write_atomic", refuse)
    target = tmp_path / "b.npz"
    result = invoke("smoke", "--source", "synthetic", "--json", "--save-batches", str(target),
                    "--artifacts-dir", str(tmp_path))
    _one_line_output_error(result, 8, "save batches to", str(target))
    out = orjson.loads(result.stdout)
    assert out["ok"] is False and out["error"]["type"] == "OutputError" and str(target) in out["error"]["message"]
    assert orjson.loads(open(out["artifact"], "rb").read()) == out


def test_heartbeat_write_failure_stops_telemetry_not_the_run(tmp_path):
    """A heartbeat line that cannot be written (disk full mid-run) stops the heartbeat with one warning; it never
    raises into the loader. A heartbeat folder that is a file is an OutputError naming it."""

    class FullDisk:
        def write(self, data):
            raise OSError(errno.ENOSPC, "no space left on device")

        def close(self):
            pass

    beat = Heartbeat(str(tmp_path))
    beat._handle = FullDisk()
    with pytest.warns(UserWarning, match="heartbeat stopped: cannot write heartbeat"):
        beat.emit("fineweb_fetch", step=1)
    beat.emit("fineweb_fetch", step=2)  # no second warning, no error
    beat.close()
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputError, match="not a directory"):
        Heartbeat(str(tmp_path / "f"))


def test_markup_like_paths_print_verbatim(tmp_path):
    """Symptom 9: paths containing [red]x[/] and [torch] are printed as typed (escaped), in the summary table and in
    error lines; rich neither raises MarkupError nor drops the brackets."""
    folder = tmp_path / MARKUP
    folder.mkdir(parents=True)
    data = write_jsonl(folder / "docs.jsonl", [{"text": "word " * 400} for _ in range(20)])
    result = invoke("smoke", "--local-path", str(data), "--seq-len", "64", "--artifacts-dir", str(folder))
    assert result.exit_code == 0, result.stderr
    assert str(folder / "smoke") in result.stderr  # the artifact row of the summary table
    missing = invoke("smoke", "--local-path", str(folder / "nope"), "--artifacts-dir", str(folder))
    assert missing.exit_code == 4 and str(folder / "nope") in missing.stderr
    assert "MarkupError" not in missing.stderr + result.stderr


def test_markup_like_output_paths_print_verbatim_in_errors(tmp_path):
    """Symptom 9: an output error about a path with brackets shows the path exactly as typed."""
    target = tmp_path / MARKUP
    target.parent.mkdir()
    target.write_text("")
    result = invoke("measure", "--source", "synthetic", "--artifacts-dir", str(target))
    _one_line_output_error(result, 8, str(target))


def test_torch_install_hint_keeps_its_brackets(tmp_path, monkeypatch):
    """Symptom 9: our own hint "pip install 'fwe[torch]'" prints with [torch]: messages are escaped, never read as
    markup."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    result = invoke("smoke", "--source", "synthetic", "--torch", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 2, result.stderr
    assert "pip install 'fwe[torch]'" in result.stderr

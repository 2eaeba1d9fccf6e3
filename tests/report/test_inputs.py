"""What `fwe report` accepts, recognised by content, and the one-line errors (exit 2) for what it cannot use, exit 8
for an output folder it cannot write."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from fwe_cli.cli.exit_codes import EXIT_OUTPUT, EXIT_USAGE
from fwe_cli.errors import InputError
from fwe_cli.report.inputs import read_input, read_inputs
from tests.helpers import invoke, write_jsonl
from tests.report.support import job_lines, write_job


def _error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _bad_input(folder: Path, name: str) -> Path:
    """The bad input `name` made in `folder`."""
    path = folder / name
    if name == "empty.json":
        path.write_bytes(b"")
    elif name == "notes.txt":
        path.write_text("hello\nworld\n")
    elif name == "other.json":
        path.write_bytes(b'{"loss": 1.5}')
    elif name == "list.json":
        path.write_bytes(b"[1, 2]")
    elif name == "error.json":
        path.write_bytes(orjson.dumps({"ok": False, "exit_code": 2, "command": "measure", "error": {"message": "x"}}))
    elif name == "empty_dir":
        path.mkdir()
    elif name == "blank_heartbeats":
        path.mkdir()
        (path / "heartbeat_rank0.jsonl").write_bytes(b"\n")
    return path


@pytest.mark.parametrize("name, says", [
    ("missing.json", "cannot read {path}: no such file"),
    ("empty.json", "{path} is empty"),
    ("notes.txt", "{path} is neither a JSON artifact nor heartbeat JSON lines"),
    ("other.json", "{path} is not an artifact fwe report knows"),
    ("list.json", "{path} holds a JSON list"),
    ("error.json", "{path} is the error object of a fwe measure run"),
    ("empty_dir", "{path} holds no heartbeat_rank*.jsonl file and no summary.json"),
    ("blank_heartbeats", "{path}: its heartbeat files hold no heartbeat line"),
])
def test_bad_input_is_one_line_naming_it_exit_2(tmp_path, name, says):
    """A missing path, an empty file, text, a JSON that is no fwe artifact, a run's error object, a folder without
    heartbeat files or a summary, heartbeat files without a line: exit 2, one `error:` line naming the path as
    given, and nothing written."""
    path = _bad_input(tmp_path, name)
    out = tmp_path / "out"
    result = invoke("report", str(path), "--out", str(out))
    assert result.exit_code == EXIT_USAGE, result.stderr
    line = _error_line(result)
    assert line.startswith("error: ") and says.format(path=path) in line
    assert not out.exists()


def test_unwritable_out_exits_8_naming_it(tmp_path):
    """--out that is a file (no folder can be made there): exit 8, one line naming it."""
    write_job(tmp_path / "logs", ranks=1, steps=5)
    blocker = tmp_path / "taken"
    blocker.write_text("a file")
    result = invoke("report", str(tmp_path / "logs"), "--out", str(blocker))
    assert result.exit_code == EXIT_OUTPUT, result.stderr
    assert str(blocker) in _error_line(result)


def test_one_heartbeat_file_with_a_torn_last_line(tmp_path):
    """A single heartbeat file is recognised by its lines; a half-written last line (a killed job) is skipped and
    counted in one warning, not fatal."""
    path = write_jsonl(tmp_path / "rank0.log", job_lines(0, 10))
    with open(path, "ab") as handle:
        handle.write(b'{"ts": 1, "msg": "fineweb_fe')
    found = read_input(str(path))
    assert found.kind == "heartbeats" and len(found.heartbeats[0].lines) == 12 and found.heartbeats[0].skipped == 1
    assert found.warnings == (f"{path}: 1 line(s) that are not heartbeat JSON skipped",)


def test_directory_ranks_in_rank_order_and_summary_folders(tmp_path):
    """A directory's heartbeat_rank*.jsonl files are read in rank order (10 after 2); a folder holding only a
    summary.json is that summary."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for rank in (10, 2, 0):
        write_jsonl(logs / f"heartbeat_rank{rank}.jsonl", job_lines(rank, 3))
    assert [Path(b.path).name for b in read_input(str(logs)).heartbeats] == [
        "heartbeat_rank0.jsonl", "heartbeat_rank2.jsonl", "heartbeat_rank10.jsonl"]
    folder = tmp_path / "tune"
    folder.mkdir()
    (folder / "summary.json").write_bytes(orjson.dumps({"settings": [], "recommendation": None, "objective": {},
                                                         "plan": {}}))
    assert read_input(str(folder)).kind == "tune"


def test_measure_heartbeats_found_beside_a_moved_summary(tmp_path):
    """A measure artifact folder copied elsewhere (CI download): each run's heartbeat, recorded relative to where
    fwe measure ran, is found in the run's folder beside the summary; a run whose file is gone gets a warning."""
    moved = tmp_path / "downloaded"
    for name in ("run00-cold", "run01-warm"):
        (moved / name).mkdir(parents=True)
        write_jsonl(moved / name / "heartbeat_rank0.jsonl", job_lines(0, 4))
    runs = [{"kind": kind, "run_dir": f"artifacts/measure/T/{name}",
             "heartbeat": f"artifacts/measure/T/{name}/heartbeat_rank0.jsonl", "phases": {}}
            for kind, name in (("cold", "run00-cold"), ("warm", "run01-warm"), ("warm", "run02-warm"))]
    (moved / "summary.json").write_bytes(orjson.dumps({"runs": runs, "verdict": {}, "plan": {"step_ms": 1.0}}))
    found = read_input(str(moved / "summary.json"))
    assert found.kind == "measure"
    assert [b and Path(b.path).parent.name for b in found.heartbeats] == ["run00-cold", "run01-warm", None]
    assert len(found.warnings) == 1 and "run02-warm/heartbeat_rank0.jsonl not found" in found.warnings[0]


def test_no_input_is_an_input_error():
    """read_inputs with nothing to read says so (the command itself requires one ARTIFACT: typer's usage error)."""
    with pytest.raises(InputError, match="no input given"):
        read_inputs([])

"""Faults of a bootstrap's output and source (issue #13): two runs on one output, an output that cannot be
written, and a source that fails while parts are being written. Each must end in one line and its exit code
(8 output, 7 disk full, 4 source), never a traceback or a manifest that two runs wrote into.

The holder of a lock is a child process, synchronized on the line it prints once it holds the lock (no sleeps)."""

from __future__ import annotations

import os

import orjson
import pytest

from tests.bootstrap.support import BOOTSTRAP_OUTPUT, cli, file_hashes, manifest_of
from tests.helpers import write_jsonl

SMALL = ("--source", "synthetic", "--gb", "0.002", "--file-mb", "1")


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_error_line(result) -> str:
    """The run's only `error:` line (and no traceback)."""
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("out_name", ["out", "out.jsonl"])
def test_a_second_run_on_a_locked_output_is_refused_naming_the_holder(tmp_path, out_name):
    """Class 1: while one run holds an output, another on it (even with --force) exits 8 at once with one line
    naming the holder's PID, and touches nothing: the output stays byte-identical. Once the holder ends, the
    output is free again."""
    out = tmp_path / "data" / out_name
    args = ("--source", "synthetic", "--gb", "0.002", "--out", str(out))
    assert cli(*args, tmp=tmp_path).exit_code == 0
    before = _files(tmp_path / "data")
    with BOOTSTRAP_OUTPUT.lock_held_elsewhere(out) as holder:
        refused = cli(*args, "--force", tmp=tmp_path)
    assert holder.returncode == 0
    assert refused.exit_code == 8
    line = " ".join(_one_error_line(refused).split())
    assert f"pid {holder.pid}" in line and "another fwe bootstrap" in line
    assert _files(tmp_path / "data") == before  # the holder removed its lock file; nothing else changed
    again = cli(*args, "--json", tmp=tmp_path)
    assert again.exit_code == 0 and orjson.loads(again.stdout)["outcome"] == "already_complete"


def test_a_lock_held_by_a_killed_run_is_not_stale(tmp_path):
    """Class 1: kill -9 of the lock holder releases the lock (the kernel drops it): the next run proceeds, and
    the lock file the killed run left does not make the output look foreign."""
    out = tmp_path / "out"
    with BOOTSTRAP_OUTPUT.lock_held_elsewhere(out) as holder:
        holder.kill()
        holder.wait(timeout=60)
    assert (out / ".fwe-bootstrap.lock").read_text().strip() == str(holder.pid)
    result = cli(*SMALL, "--out", str(out), tmp=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert manifest_of(out)["complete"] is True and len(file_hashes(out)) == 2
    assert not (out / ".fwe-bootstrap.lock").exists()


def _not_a_directory(tmp_path):
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain" / "out", "cannot create directory", "not a directory (errno ENOTDIR)"


def _existing_file_as_directory(tmp_path):
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain", "exists and is not a directory", "end the path in .jsonl"


def _directory_as_single_file(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    return tmp_path / "dir.jsonl", "is a directory", "single-file bootstrap"


def _name_too_long(tmp_path):
    return tmp_path / ("x" * 300), "cannot create directory", "file name too long (errno ENAMETOOLONG)"


def _unwritable_directory(tmp_path):
    """A directory without write permission; as root, where permissions do not stop writes, a path below a file."""
    if os.geteuid() == 0:
        return _not_a_directory(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return locked / "out", "cannot create directory", "permission denied (errno EACCES)"


@pytest.mark.parametrize("case", [_not_a_directory, _existing_file_as_directory, _directory_as_single_file,
                                  _name_too_long, _unwritable_directory], ids=lambda case: case.__name__[1:])
def test_an_output_that_cannot_be_created_is_one_line_exit_8(tmp_path, case):
    """Class 5: an --out that cannot be made (below a file, an existing file or directory of the wrong kind, a
    name too long, no permission) exits 8 with one line naming the path and what was being done; no traceback."""
    out, operation, reason = case(tmp_path)
    try:
        result = cli("--source", "synthetic", "--gb", "0.002", "--out", str(out), tmp=tmp_path)
    finally:
        if (tmp_path / "locked").exists():
            (tmp_path / "locked").chmod(0o755)  # so that pytest can clean up
    assert result.exit_code == 8, result.stderr
    line = " ".join(_one_error_line(result).split())
    assert str(out) in line and operation in line and reason in line


@pytest.mark.parametrize("errno_name, code, words", [("EROFS", 8, "read-only file system (errno EROFS)"),
                                                     ("EIO", 8, "input/output error (errno EIO)"),
                                                     ("ENOSPC", 7, "no space left on device (errno ENOSPC)")])
def test_a_part_that_stops_being_writable_is_one_line_naming_it(tmp_path, errno_name, code, words):
    """Class 5: a write that fails mid-run (read-only remount, I/O error, full disk; injected, so it needs no
    root) exits 8, or 7 for a full disk, with one line naming the part file and the OS's reason."""
    out = tmp_path / "out"
    result = cli(*SMALL, "--out", str(out), tmp=tmp_path,
                 env={"FWE_TEST_ENOSPC_AFTER_BYTES": "1000", "FWE_TEST_WRITE_ERRNO": errno_name})
    assert result.exit_code == code, result.stderr
    line = " ".join(_one_error_line(result).split())
    assert f"cannot write {out / 'part-00000.jsonl.partial'}: {words}" in line


def test_a_source_failing_mid_run_is_a_source_error(tmp_path):
    """Class 10: a source file that cannot be read (here a corrupt .gz, after a good file has been copied into
    the parts) is the input's error (exit 2, naming the file), not 8 'cannot write OUT': the output was fine."""
    source = tmp_path / "src"
    source.mkdir()
    write_jsonl(source / "a.jsonl", [{"text": f"document {i} " * 20, "id": str(i)} for i in range(500)])
    (source / "b.jsonl.gz").write_bytes(b"not gzip at all")  # gzip.BadGzipFile, an OSError
    out = tmp_path / "out"
    result = cli("--local-path", str(source), "--gb", "0.01", "--out", str(out), tmp=tmp_path)
    assert result.exit_code == 2, result.stderr
    line = " ".join(_one_error_line(result).split())
    assert "b.jsonl.gz is truncated or corrupt" in line and "cannot write" not in line

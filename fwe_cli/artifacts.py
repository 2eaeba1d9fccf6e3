"""What every artifact shares: where it goes, how it is written (atomically, pretty JSON, named by UTC time), its
timestamps, its provenance block (host, versions) and the shape of an error record."""

from __future__ import annotations

import errno
import os
import tempfile
import time
from datetime import datetime, timezone

import orjson

from fwe_cli.errors import DiskSpaceError, OutputError, os_error_line

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # the errnos of a full disk and of a full quota


def utc_stamp() -> str:
    """UTC timestamp safe for file names, sortable, unique to the millisecond."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ").replace(".", "_", 1)[:-4] + "Z"


def utc_iso(ts: float | None = None) -> str:
    """ISO 8601 UTC time with milliseconds (now, or the epoch seconds `ts`): every timestamp fwe writes."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, tz=timezone.utc).isoformat(timespec="milliseconds")


def provenance(disk_path: str = ".") -> dict:
    """Host facts (free disk of `disk_path`), installed versions and fwe's own: recorded in every artifact."""
    from fwe_cli import __version__
    from fwe_cli.hostinfo import host_facts, package_versions

    return {"host": host_facts(disk_path), "versions": package_versions(), "fwe_version": __version__}


def error_record(exc: BaseException, stage: str | None = None) -> dict:
    """How an artifact records a failure: {type, message, stage} (stage: where the loader was, when known)."""
    return {"type": type(exc).__name__, "message": str(exc), "stage": getattr(exc, "stage", stage)}


def dumps(obj) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def write_atomic(path: str, data: bytes) -> str:
    """Write `data` to `path` via a temporary file and rename, so a reader never sees half a file. Raises OSError
    (caches catch it and go on without the entry; outputs go through `write_output`)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        if os.path.lexists(tmp):  # a full disk or a failed rename must not leave the half file behind
            os.unlink(tmp)
        raise
    return path


def output_error(operation: str, path: str, exc: OSError, when_full: str = "") -> OutputError:
    """What an OSError on an output becomes: DiskSpaceError on a full disk or quota (followed by `when_full`, what
    to do then, when given), OutputError otherwise, each one line naming the operation and the path."""
    line = os_error_line(operation, path, exc)
    if exc.errno in DISK_FULL:
        return DiskSpaceError(f"{line}: {when_full}" if when_full else line)
    return OutputError(line)


def write_output(path: str, data: bytes) -> str:
    """`write_atomic` for an output the user asked for (an artifact, fwe.env): OutputError instead of OSError."""
    try:
        return write_atomic(path, data)
    except OSError as exc:
        raise output_error("write", path, exc) from None


def write_json(path: str, obj) -> str:
    """Write `obj` as pretty JSON, atomically (OutputError when it cannot be written)."""
    return write_output(path, dumps(obj) + b"\n")


def _not_a_directory(path: str) -> bool:
    return os.path.lexists(path) and not os.path.isdir(path)


def _probe(directory: str) -> None:
    """Raise the OSError writing a file into `directory` would: checked before a run, not after its work is done."""
    if _not_a_directory(directory):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    with tempfile.TemporaryFile(dir=directory):
        pass


def prepare_output_dir(directory: str, operation: str = "write to") -> str:
    """Create `directory` (with its parents) and check a file can be written there; OutputError naming it (and
    `operation`) if not."""
    try:
        if not _not_a_directory(directory):  # makedirs would say only "file exists"; _probe says what is wrong
            os.makedirs(directory, exist_ok=True)
        _probe(directory)
    except OSError as exc:
        raise output_error(operation, directory, exc) from None
    return directory


def check_output_file(path: str, operation: str) -> str:
    """Check that the file `path` can be written later: its folder exists (fwe creates no folder named only as a
    file's parent: a typo there should fail, not scatter files) and takes a file, and `path` is no folder."""
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.lexists(parent):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT) + " (its folder does not exist)")
        _probe(parent)
    except OSError as exc:
        raise output_error(operation, path, exc) from None
    return path


def artifact_path(artifacts_dir: str, command: str, stamp: str | None = None) -> str:
    """artifacts_dir/command/<UTC timestamp>.json"""
    return os.path.join(artifacts_dir, command, f"{stamp or utc_stamp()}.json")

"""What every artifact shares: where it goes, how it is written (atomically, pretty JSON, named by UTC time), its
timestamps, its provenance block (host, versions) and the shape of an error record."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import orjson


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
    """Write `data` to `path` via a temporary file and rename, so a reader never sees half a file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
    return path


def write_json(path: str, obj) -> str:
    """Write `obj` as pretty JSON, atomically."""
    return write_atomic(path, dumps(obj) + b"\n")


def artifact_path(artifacts_dir: str, command: str, stamp: str | None = None) -> str:
    """artifacts_dir/command/<UTC timestamp>.json"""
    return os.path.join(artifacts_dir, command, f"{stamp or utc_stamp()}.json")

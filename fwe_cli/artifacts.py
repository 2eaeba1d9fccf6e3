"""Where artifacts go and how they are written: atomically, as pretty JSON, named by UTC time."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import orjson


def utc_stamp() -> str:
    """UTC timestamp safe for file names, sortable, unique to the millisecond."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ").replace(".", "_", 1)[:-4] + "Z"


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

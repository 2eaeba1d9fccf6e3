"""The test Hub server's request log: one JSON object per answered (or cut, or stalled) request.

Kept in memory for tests and, when a path is given, appended to a JSON-lines file as answers finish:

    {"seq": 3, "t": 0.412, "conn": 2, "method": "GET", "path": "/api/datasets/HuggingFaceFW/fineweb-edu/...",
     "endpoint": "GET /api/datasets/{repo}/revision/{sha}", "kind": "api", "range": null, "status": 200, "bytes": 724,
     "fault": null, "ua": "datasets/5.2.0; hf_hub/2.4.0; python/3.11.7; ...", "auth": false, "ms": 0.9}

`kind` is what the request is to the Hub's quotas: "resolve" (a `/resolve/` file request, which the Hub limits per
5 minutes), "cdn" (a signed download URL: tests/hubsim/cdn.py), "api" or "other".
`endpoint` is the path (and query) with repo ids, commit shas and shard numbers replaced by {repo}, {sha}
and {shard}, so a sequence of endpoints can be compared across builds and runs. `conn` numbers the TCP
connections the server accepted; `fault` is null, "fail", "drop", "stall", "burst", "hangup", "unanswered",
"redirect" or "refused" (a CDN URL expired or tampered: 403; a stalled request is logged on arrival, without
status or ms); `auth` whether the request carried an Authorization header (never its value); `ms` is the time
spent answering, injected delay included.

`seq` is the ARRIVAL order: the handler takes a number (`RequestLog.arrive`) when it has read the request
line, and the record lands under that number when the answer is done (`RequestLog.add`). A client sees
its answer a moment before the server logs it, and answers on different connections finish in any
order, so `records()` and `read_log` sort by `seq`: for a client that sends one request after the other
the log order is then the request order, whatever the machine's load. A request belongs to the log that
was current when it arrived, never to one started later (e.g. by the next test).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Callable

import orjson

_SHA = re.compile(r"\b[0-9a-f]{40}\b")
_SHARD = re.compile(r"\b\d{3}_\d{5}\.parquet\b")


def endpoint_template(method: str, path: str, repo_ids: list[str]) -> str:
    """'GET /datasets/HuggingFaceFW/fineweb-edu/resolve/<sha>/x' -> 'GET /datasets/{repo}/resolve/{sha}/x'."""
    for repo_id in sorted(repo_ids, key=len, reverse=True):
        path = path.replace(f"/{repo_id}/", "/{repo}/").replace(f"/{repo_id}?", "/{repo}?")
        if path.endswith(f"/{repo_id}"):
            path = path[: -len(repo_id)] + "{repo}"
    path = _SHARD.sub("{shard}.parquet", _SHA.sub("{sha}", path))
    return f"{method} {path}"


def request_kind(path: str) -> str:
    """'resolve', 'cdn', 'api' or 'other' (see the module's docstring) of a request for `path`."""
    path = path.split("?", 1)[0]
    if path.startswith("/cdn/"):
        return "cdn"
    return "api" if path.startswith("/api/") else "resolve" if "/resolve/" in path else "other"


class RequestLog:
    """Thread-safe list of request records, mirrored to a JSON-lines file when `path` is set and passed
    to `on_record` (e.g. to print them) as they are added."""

    def __init__(self, path: str | Path | None = None, on_record: Callable[[dict], None] | None = None):
        self.path = Path(path) if path else None
        self.on_record = on_record
        self.started = time.monotonic()
        self._records: list[dict] = []
        self._arrived = 0
        self._lock = threading.Lock()
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(b"")

    def arrive(self) -> int:
        """The arrival number (`seq`) of a request whose line was just read."""
        with self._lock:
            self._arrived += 1
            return self._arrived

    def add(self, record: dict, seq: int | None = None) -> None:
        """Log `record` under its arrival number `seq` (a fresh one when None); `t` is when it is logged."""
        with self._lock:
            if seq is None:
                self._arrived += 1
                seq = self._arrived
            record = {"seq": seq, "t": round(time.monotonic() - self.started, 4), **record}
            self._records.append(record)
            if self.path:
                with self.path.open("ab") as handle:
                    handle.write(orjson.dumps(record) + b"\n")
        if self.on_record is not None:
            self.on_record(record)

    def records(self) -> list[dict]:
        """The logged records in arrival order (requests still being answered are not in yet)."""
        with self._lock:
            return sorted(self._records, key=lambda r: r["seq"])

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)


def read_log(path: str | Path) -> list[dict]:
    """Records of a JSON-lines request log written by the server, in arrival order (like `records()`)."""
    records = [orjson.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]
    return sorted(records, key=lambda r: r["seq"])

"""Heartbeat telemetry in the users' format, and latency summaries.

Each line of heartbeat_rank{rank}.jsonl: {"ts", "iso", "pid", "rank", "step", "msg", ...fields}.
Events: fineweb_loader_ready {dt}, fineweb_loader_error {error}, fineweb_loader_warmup
{requested, filled, wait_ms}, fineweb_loader_fallback {reason}, fineweb_fetch per step {dt_fetch_s,
fetch_p50_ms, fetch_p95_ms, queue_fill (batches queued when the step asked; null without prefetch), wait_s_by_stage
(the wait split by what the producer did meanwhile, loader.stages: {"source_read": 0.041, "tokenize": 0.006},
seconds, adding up to dt_fetch_s; a wait that found a batch queued is all "queue_get", the hand-off itself), and the
fields a source of several segments adds (Source.on_batch)}, the events such a source emits itself, fineweb_progress
every report_docs documents, and fineweb_hub_retry {what, attempt, reason, wait_s} (step null) each time a Hub request is retried
(transient.py: `what` names the request, `attempt` the failed one, `reason` e.g. "HTTP 429", `wait_s` the jittered
wait before the next).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from typing import Sequence

import orjson

from fwe_cli.artifacts import output_error, prepare_output_dir, utc_iso


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of sorted values, interpolated linearly between ranks (numpy's default method).

    Plain Python: numpy's first np.percentile call in a process loads its lazy submodules, which costs a short run
    (a smoke's summary after one batch) more than the sorting does."""
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99/max in milliseconds of a list of durations in seconds (None when empty)."""
    if not seconds:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(float(s) * 1000.0 for s in seconds)
    return {"p50": round(percentile(ordered, 50), 4), "p95": round(percentile(ordered, 95), 4),
            "p99": round(percentile(ordered, 99), 4), "max": round(ordered[-1], 4)}



class Heartbeat:
    """Appends JSON lines to heartbeat_rank{rank}.jsonl; thread-safe; a no-op without a directory."""

    def __init__(self, directory: str | None, rank: int = 0):
        self.rank = rank
        self.path = None
        self._lock = threading.Lock()
        self._handle = None
        if directory:
            prepare_output_dir(directory, "write heartbeat to")  # OutputError naming the directory (a file, unwritable): before any work
            self.path = os.path.join(directory, f"heartbeat_rank{rank}.jsonl")
            try:
                self._handle = open(self.path, "ab", buffering=0)
            except OSError as exc:
                raise output_error("write heartbeat", self.path, exc) from None

    def emit(self, msg: str, step: int | None = None, **fields) -> None:
        if self._handle is None:
            return
        now = time.time()
        line = {"ts": round(now, 6), "iso": utc_iso(now), "pid": os.getpid(), "rank": self.rank, "step": step,
                "msg": msg, **fields}
        data = orjson.dumps(line, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        with self._lock:
            if self._handle is not None:
                try:
                    self._handle.write(data)
                except OSError as exc:
                    # telemetry must not end the training run it describes (a full disk mid-run): stop writing it,
                    # say so once
                    self._handle.close()
                    self._handle = None
                    warnings.warn(f"heartbeat stopped: {output_error('write heartbeat', self.path, exc)}", stacklevel=2)

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

"""Heartbeat telemetry in the users' format (latency percentiles: fwe_cli.loader.quantiles).

Each line of heartbeat_rank{rank}.jsonl: {"ts", "iso", "pid", "rank", "step", "msg", ...fields}.
Events: fineweb_loader_ready {dt}, fineweb_loader_error {error}, fineweb_loader_warmup
{requested, filled, wait_ms}, fineweb_loader_fallback {reason}, fineweb_fetch per step {dt_fetch_s,
fetch_p50_ms, fetch_p95_ms, and `part` ('head' or 'tail') for a bootstrap continued from the Hub, queue_fill (batches
queued when the step asked; null without prefetch), wait_s_by_stage (the wait split by what the producer did
meanwhile, loader.stages: {"source_read": 0.041, "tokenize": 0.006}, seconds, adding up to dt_fetch_s; a wait that
found a batch queued is all "queue_get", the hand-off itself)},
fineweb_tail_started {dt_fetch_s, head_documents} at the first tail batch, fineweb_progress every report_docs
documents, and fineweb_hub_retry {what, attempt, reason, wait_s} (step null) each time a Hub request is retried
(transient.py: `what` names the request, `attempt` the failed one, `reason` e.g. "HTTP 429", `wait_s` the jittered
wait before the next).
"""

from __future__ import annotations

import os
import threading
import time
import warnings

import orjson

from fwe_cli.artifacts import output_error, prepare_output_dir, utc_iso


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


class Parts:
    """Batches by the part of a source of two they came from (a bootstrap's 'head', the Hub's 'tail'), and the
    boundary: the first tail batch, its step, how long it was waited for and when (a `fineweb_tail_started` line)."""

    def __init__(self, heartbeat: Heartbeat):
        self._heartbeat = heartbeat
        self.batches: dict[str, int] = {}
        self.last_step: dict[str, int] = {}
        """The step of the latest batch from each part."""
        self.boundary: dict | None = None

    def note(self, part: str, step: int, dt: float, head_documents: int | None) -> None:
        self.batches[part] = self.batches.get(part, 0) + 1
        self.last_step[part] = step
        if part == "tail" and self.boundary is None:
            self.boundary = {"step": step, "fetch_ms": round(dt * 1000, 3), "iso": utc_iso(),
                             "head_documents": head_documents}
            self._heartbeat.emit("fineweb_tail_started", step=step, dt_fetch_s=round(dt, 6),
                                 head_documents=head_documents)

    def to_dict(self) -> dict | None:
        """{head_batches, tail_batches, boundary} for `stats()`; None for a source of one part."""
        if not self.batches:
            return None
        return {"head_batches": self.batches.get("head", 0), "tail_batches": self.batches.get("tail", 0),
                "boundary": self.boundary}

"""Heartbeat telemetry in the users' format (latency percentiles: fwe_cli.loader.pipeline.quantiles).

Each line of heartbeat_rank{rank}.jsonl: {"ts", "iso", "pid", "rank", "step", "msg", ...fields}.
Events: fineweb_loader_ready {dt}, fineweb_loader_error {error}, fineweb_loader_warmup
{requested, filled, wait_ms}, fineweb_loader_fallback {reason}, fineweb_fetch per step {dt_fetch_s,
fetch_p50_ms, fetch_p95_ms, queue_fill (batches queued when the step asked; null without prefetch), wait_s_by_stage
(the wait split by what the producer did meanwhile, flow.stages: {"source_read": 0.041, "tokenize": 0.006},
seconds, adding up to dt_fetch_s; a wait that found a batch queued is all "queue_get", the hand-off itself), and the
fields a source of several segments adds (Source.on_batch)}, the events such a source emits itself (a mix's
fineweb_mix {by, sources} every 100 batches, with a schedule also {schedule: {step, stage, weights}}: the weights in
force where the mix reads), fineweb_progress every report_docs documents {docs, tokens (read), batches, docs_per_s,
tokens_per_s, pack, cropped_tokens, cropped_documents (cropped at the rows' ends so far)}, and fineweb_hub_retry {what, attempt, reason, wait_s} (step
null) each time a Hub request is retried (transient.py: `what` names the request, `attempt` the failed one, `reason` e.g. "HTTP 429", `wait_s` the jittered
wait before the next).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import deque

import orjson

from fwe_cli.artifacts import output_error, prepare_output_dir, utc_iso
from fwe_cli.loader.pipeline.quantiles import percentiles_ms

ROLLING_WINDOW = 200  # fetch latencies kept for the rolling p50/p95 of the fineweb_fetch lines


class Heartbeat:
    """Appends JSON lines to heartbeat_rank{rank}.jsonl; thread-safe; a no-op without a directory."""

    def __init__(self, directory: str | None, rank: int = 0):
        self.rank = rank
        self.path = None
        self._lock = threading.Lock()
        self._handle = None
        self._rolling: deque[float] = deque(maxlen=ROLLING_WINDOW)
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

    def fetch(self, step: int, dt: float, **fields) -> None:
        """The fineweb_fetch line of a step that waited `dt` seconds, with the rolling p50/p95 of the last
        ROLLING_WINDOW waits (sorted per line: only when the line is written)."""
        self._rolling.append(dt)
        if self._handle is not None:
            roll = percentiles_ms(self._rolling)
            self.emit("fineweb_fetch", step=step, dt_fetch_s=round(dt, 6), fetch_p50_ms=roll["p50"],
                      fetch_p95_ms=roll["p95"], **fields)

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

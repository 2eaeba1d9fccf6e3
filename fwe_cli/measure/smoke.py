"""Smoke test of the loader: time to first batch, a few more batches, and checks on what came out.

`SmokeRun.finish` never raises for a loader failure or a failed check: it returns the result (ok false, error filled
in) together with the exception (CheckFailed for a check), so the caller can both write the artifact and map the
exception to an exit code.
"""

from __future__ import annotations

import glob
import io
import threading
import time
from typing import Callable

import numpy as np
import orjson

from fwe_cli.artifacts import error_record, output_error, provenance, utc_iso, write_atomic
from fwe_cli.errors import CheckFailed, ConfigError, EndOfData, FweError, OutputError, os_error_line
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.variables import env_snapshot
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.sources.position import encode
from fwe_cli.measure.hub_requests import hub_requests, requests_sent, start_counting, uses_hub

SEPARATOR_CHECK_MIN_TOKENS = 65_536  # below this, documents may legitimately span every pulled row


class BatchChecks:
    """The checks of the pulled batches (shape, dtype, id range, separators), made as each batch comes: a smoke of a
    million batches keeps none of them. `add(batch, eos_id)` each batch with its tokenizer's end-of-document id, or
    None while no tokenizer is loaded (a warm Hub start's kept batches: held until one is, few by nature);
    `checks(vocab_size, eos_id)` the verdicts, each {name, ok, detail}."""

    LISTED = 10  # batch numbers named in a failed shape check

    def __init__(self, shape: tuple[int, int]):
        self.shape = shape
        self.batches = 0
        self.tokens = 0
        self.bad_shape: list[int] = []  # the first LISTED batches of a wrong shape
        self.bad_shapes = 0
        self.dtypes: set[str] = set()
        self.low: int | None = None
        self.high: int | None = None
        self.separators = 0
        self._held: list[np.ndarray] = []  # batches waiting for an eos id to count theirs
        self.unshifted: int | None = None
        """With labels: batches whose labels are not the inputs shifted by one (across batches too)."""
        self._last_label: int | None = None

    def add(self, batch, eos_id: int | None) -> None:
        """One batch: its tokens (a dict's "input", its labels checked against them), as it comes."""
        if isinstance(batch, dict):
            if "labels" in batch:
                self._shifted(batch["input"], batch["labels"])
            batch = batch["input"]
        if tuple(batch.shape) != self.shape:
            self.bad_shapes += 1
            if len(self.bad_shape) < self.LISTED:
                self.bad_shape.append(self.batches)
        self.batches += 1
        self.tokens += int(batch.size)
        self.dtypes.add(str(batch.dtype))
        low, high = int(batch.min()), int(batch.max())
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)
        if eos_id is None:
            self._held.append(batch)
            return
        self._count_separators(eos_id)
        self.separators += int(np.count_nonzero(batch == eos_id))

    def _shifted(self, inputs: np.ndarray, labels: np.ndarray) -> None:
        """Count the batch when its labels are not its inputs shifted by one token, the last one the next batch's
        first input."""
        flat_in, flat_labels = inputs.reshape(-1), labels.reshape(-1)
        ok = np.array_equal(flat_labels[:-1], flat_in[1:]) and self._last_label in (None, int(flat_in[0]))
        self.unshifted = (self.unshifted or 0) + (not ok)
        self._last_label = int(flat_labels[-1])

    def _count_separators(self, eos_id: int) -> None:
        for held in self._held:
            self.separators += int(np.count_nonzero(held == eos_id))
        self._held = []

    def checks(self, vocab_size: int, eos_id: int) -> list[dict]:
        self._count_separators(eos_id)
        more = f" and {self.bad_shapes - len(self.bad_shape)} more" if self.bad_shapes > len(self.bad_shape) else ""
        bad_dtype = sorted(self.dtypes - {"int32"})
        enough = self.tokens >= SEPARATOR_CHECK_MIN_TOKENS
        return [
            {"name": "shape", "ok": not self.bad_shapes, "detail": f"expected {list(self.shape)}"
             + (f"; wrong in batches {self.bad_shape}{more}" if self.bad_shapes else "")},
            {"name": "dtype", "ok": not bad_dtype, "detail": "int32" if not bad_dtype else f"got {bad_dtype}"},
            {"name": "id_range", "ok": self.low >= 0 and self.high < vocab_size,
             "detail": f"ids in [{self.low}, {self.high}], vocab_size {vocab_size}"},
            {"name": "separators", "ok": self.separators > 0 or not enough,
             "detail": f"{self.separators} document separators (id {eos_id}) in {self.tokens} tokens"
             + ("" if self.separators or enough else "; too few tokens pulled to require one")}] + ([] if (
                self.unshifted is None) else [{"name": "labels", "ok": not self.unshifted, "detail": (
                    "labels are the inputs shifted by one token in every batch" if not self.unshifted else
                    f"{self.unshifted} batches whose labels are not the inputs shifted by one token")}])


def _as_numpy(batch):
    """A batch as numpy: an array, or a dict of arrays (with labels or boundaries)."""
    if isinstance(batch, dict):
        return {key: _as_numpy(value) for key, value in batch.items()}
    return batch.numpy() if hasattr(batch, "numpy") and not isinstance(batch, np.ndarray) else batch


def _pull(loader: FineWebLoader, batches: int, take: Callable[[np.ndarray], None]) -> None:
    """Up to `batches` batches, each handed to `take` as it comes (those before a failure too), all within
    the one limit config.loader_timeout (the loader keeps it: `deadline`); LoaderTimeout naming the stage when it
    passes. A fallback to synthetic data gives the batches after it the
    whole limit again (they come from another source)."""
    seconds = loader.config.loader_timeout
    deadline = time.perf_counter() + seconds
    for _ in range(batches):
        fell_back = loader.fallback is not None
        try:
            take(_as_numpy(loader.next_batch(deadline=deadline)))
        except EndOfData:
            break
        if loader.fallback is not None and not fell_back:
            deadline = time.perf_counter() + seconds


class SmokeRun:
    """One smoke, started: its loader is working (a last-resort watchdog may follow `loader.returns_by`) and the
    host facts are being gathered; `finish` pulls the batches, checks them and gives the result.

        run = SmokeRun(config)
        result, failure = run.finish(batches=3)

    `resume`: a loader state to start from (`read_resume_state`); `requests_from`: how many Hub requests this process
    had sent when the run began (default: as many as now; the `fwe` process may send a run's first before)."""

    def __init__(self, config: LoaderConfig, resume: dict | list[dict] | None = None,
                 requests_from: int | None = None):
        self.config, self.resume = config, resume
        self.started = utc_iso()
        # host facts and package versions (imports and metadata reads) are gathered while the loader waits on the
        # network, not after the last batch
        self._facts: dict = {}
        self._gathering = threading.Thread(target=lambda: self._facts.update(provenance()), name="fwe-provenance",
                                           daemon=True)
        self._gathering.start()
        self._counting = uses_hub(config) and start_counting()
        self._requests_before = requests_sent() if requests_from is None else requests_from
        self.loader = FineWebLoader(config, state=resume)

    def finish(self, batches: int = 3, save_path: str | None = None,
               save_state: str | None = None) -> tuple[dict, FweError | None]:
        """Pull `batches` batches under config.loader_timeout (one limit for all of them), check them, close the
        loader; the result and the run's failure (None when ok). `save_path`: an .npz for the batches;
        `save_state`: where to write the loader's state after the last batch (JSON)."""
        config, loader = self.config, self.loader
        checks = BatchChecks((config.batch_size, config.seq_len))
        kept: list[np.ndarray] = []  # only with save_path: the batches to save

        def take(batch: np.ndarray) -> None:
            tokenizer = loader.pipeline.tokenizer
            checks.add(batch, None if tokenizer is None else tokenizer.bos_id if config.bos else tokenizer.eos_id)
            if save_path:
                kept.append(batch)

        error: FweError | None = None
        try:
            _pull(loader, batches, take)
        except FweError as exc:
            error = exc
        finally:
            elapsed = time.perf_counter() - loader.created
            loader.close(join_timeout=0.5 if error else 2.0, abandon_encodes=True)  # its caller ends the run now
        result = _result(config, loader.stats(), checks, error, elapsed)
        sent = requests_sent() - self._requests_before
        produced = loader.pipeline.requests_at.get("first_batch")  # the count when the first batch was made
        counting = self._counting
        self._gathering.join()
        result.update({
            "requests": sent if counting else None,
            "requests_first_batch": produced - self._requests_before if counting and produced is not None else None,
            "hub_requests": hub_requests(since=self._requests_before) if counting else None,
            # the gathering thread failed (its error is not the run's): ask again, here
            "config": config.to_json(), "env": env_snapshot(), **(self._facts or provenance()),
            "started": self.started, "finished": utc_iso(),
        })
        if save_state and (error is None or checks.batches):  # after a failure: where the batches handed over end
            try:
                write_atomic(save_state, orjson.dumps(loader.state_dict()) + b"\n")
                result["saved_state"] = save_state
            except OSError as exc:
                error = output_error("save the loader state to", save_state, exc)
                result.update(ok=False, error=error_record(error))
        if isinstance(self.resume, list):  # every rank's state of another world: this rank's share of what they left
            plan = self.loader.pipeline.documents.plan
            result["resumed_from"] = {"states": len(self.resume), "plan": encode(plan)}
        elif self.resume is not None:
            result["resumed_from"] = {"batches": self.resume.get("batches"), "position": self.resume.get("position")}
        if save_path and kept:
            failure = _save(save_path, kept, config)
            if failure is None:
                result["saved_batches"] = save_path
            elif error is None:  # the batches were fine; the run still failed to deliver what was asked
                error = failure
                result.update(ok=False, error=error_record(failure))
        if error is None and not result["ok"]:
            error = CheckFailed([check["name"] for check in result["checks"] if not check["ok"]])
            result["error"] = error_record(error)
        return result, error


def read_resume_state(path: str) -> dict | list[dict]:
    """The loader state in a --save-state file (for --resume-state), or, for a glob (`ckpt/state_*.json`), the states
    of every rank of a world, in path order (a change of world size: loader.elastic); ConfigError naming the file
    when one cannot be read or is not JSON, or the glob when it names none."""
    if glob.has_magic(path):
        paths = sorted(glob.glob(path))
        if not paths:
            raise ConfigError(f"--resume-state {path} names no file: give the states --save-state wrote (a glob "
                              "naming every rank's, to resume them at another world size)")
        return [read_resume_state(found) for found in paths]
    try:
        with open(path, "rb") as handle:
            return orjson.loads(handle.read())
    except OSError as exc:
        raise ConfigError(os_error_line("read the resume state", path, exc)) from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"--resume-state {path} is not JSON ({exc}): give a file written by --save-state") from None


def _save(path: str, pulled: list, config: LoaderConfig) -> OutputError | None:
    """Write the pulled batches to `path` (.npz content under exactly that name: np.savez given a name would add
    .npz to any other), atomically: `batches` (the inputs), and `labels`, `positions`, `cu_seqlens` when the batches
    carry them; the OutputError naming the path when it cannot be written."""
    buffer = io.BytesIO()
    parts = {"batches": np.stack([b["input"] if isinstance(b, dict) else b for b in pulled])}
    for key in ("labels", "positions", "cu_seqlens"):
        if isinstance(pulled[0], dict) and key in pulled[0]:
            parts[key] = np.stack([b[key] for b in pulled])
    np.savez(buffer, **parts, config=np.frombuffer(str(config.to_json()).encode(), np.uint8))
    try:
        write_atomic(path, buffer.getvalue())
    except OSError as exc:
        return output_error("save batches to", path, exc)
    return None


def _result(config: LoaderConfig, stats: dict, pulled: BatchChecks, error: Exception | None,
            elapsed: float) -> dict:
    """The smoke result's measured part (keys in the artifact's order; SmokeRun.finish adds context after them)."""
    tok = stats["tokenizer"]
    separator = tok and (tok.get("bos_id", tok["eos_id"]) if config.bos else tok["eos_id"])
    checks = pulled.checks(tok["vocab_size"], separator) if pulled.batches and tok else []
    if error is None and not pulled.batches:
        checks.append({"name": "batches", "ok": False, "detail": "the source ended before one full batch"})
    tokens = pulled.tokens
    return {
        "ok": error is None and bool(pulled.batches) and all(c["ok"] for c in checks),
        "first_batch_s": stats["first_batch_s"],
        "batches": pulled.batches,
        "shape": [config.batch_size, config.seq_len],
        "dtype": "int32",
        "tokens": tokens,
        "tokens_per_s": round(tokens / elapsed, 1) if tokens else 0.0,
        # HTTP requests sent through huggingface_hub (Hub source or Hub tokenizer); None when no Hub was involved
        "requests": None,
        "requests_first_batch": None,  # of those, sent before the first batch was produced
        "hub_requests": None,  # of those, by kind (resolver, api, cdn) and events (re_resolves, failed_resolves, range_fallbacks)
        "tokenizer": tok,
        "source": stats["source"],
        "fallback": stats["fallback"],
        "warmup": stats["warmup"],
        "checks": checks,
        "error": None if error is None else error_record(error, stats["stage"]),
        "loader": stats,
    }

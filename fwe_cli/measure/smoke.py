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

import numpy as np
import orjson

from fwe_cli.artifacts import error_record, output_error, provenance, utc_iso, write_atomic
from fwe_cli.errors import CheckFailed, ConfigError, EndOfData, FweError, OutputError, os_error_line
from fwe_cli.loader.config import LoaderConfig, env_snapshot
from fwe_cli.measure.hub_requests import requests_sent, start_counting, uses_hub
from fwe_cli.loader.fineweb_loader import FineWebLoader

SEPARATOR_CHECK_MIN_TOKENS = 65_536  # below this, documents may legitimately span every pulled row


def check_batches(batches: list[np.ndarray], config: LoaderConfig, vocab_size: int, eos_id: int) -> list[dict]:
    """Shape, dtype, id range and separator checks; each {name, ok, detail}."""
    checks = []
    shape = (config.batch_size, config.seq_len)
    bad_shape = [i for i, b in enumerate(batches) if tuple(b.shape) != shape]
    checks.append({"name": "shape", "ok": not bad_shape,
                   "detail": f"expected {list(shape)}" + (f"; wrong in batches {bad_shape}" if bad_shape else "")})
    bad_dtype = sorted({str(b.dtype) for b in batches} - {"int32"})
    checks.append({"name": "dtype", "ok": not bad_dtype, "detail": "int32" if not bad_dtype else f"got {bad_dtype}"})
    lo = min(int(b.min()) for b in batches)
    hi = max(int(b.max()) for b in batches)
    checks.append({"name": "id_range", "ok": lo >= 0 and hi < vocab_size,
                   "detail": f"ids in [{lo}, {hi}], vocab_size {vocab_size}"})
    pulled = sum(int(b.size) for b in batches)
    separators = sum(int(np.count_nonzero(b == eos_id)) for b in batches)
    enough = pulled >= SEPARATOR_CHECK_MIN_TOKENS
    checks.append({"name": "separators", "ok": separators > 0 or not enough,
                   "detail": f"{separators} end-of-document ids (id {eos_id}) in {pulled} tokens"
                   + ("" if separators or enough else "; too few tokens pulled to require one")})
    return checks


def _as_numpy(batch) -> np.ndarray:
    return batch.numpy() if hasattr(batch, "numpy") and not isinstance(batch, np.ndarray) else batch


def _pull(loader: FineWebLoader, batches: int, pulled: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Up to `batches` batches appended to `pulled` (those before a failure stay there) and returned, all within
    the one limit config.loader_timeout (the loader keeps it: `deadline`); LoaderTimeout naming the stage when it
    passes. A fallback to synthetic data gives the batches after it the
    whole limit again (they come from another source)."""
    seconds = loader.config.loader_timeout
    deadline = time.perf_counter() + seconds
    pulled = [] if pulled is None else pulled
    for _ in range(batches):
        fell_back = loader.fallback is not None
        try:
            pulled.append(_as_numpy(loader.next_batch(deadline=deadline)))
        except EndOfData:
            break
        if loader.fallback is not None and not fell_back:
            deadline = time.perf_counter() + seconds
    return pulled


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
        pulled: list[np.ndarray] = []
        error: FweError | None = None
        try:
            _pull(loader, batches, pulled)
        except FweError as exc:
            error = exc
        finally:
            elapsed = time.perf_counter() - loader.created
            loader.close(join_timeout=0.5 if error else 2.0, abandon_encodes=True)  # its caller ends the run now
        result = _result(config, loader.stats(), pulled, error, elapsed)
        sent = requests_sent() - self._requests_before
        produced = loader.pipeline.requests_at.get("first_batch")  # the count when the first batch was made
        counting = self._counting
        self._gathering.join()
        result.update({
            "requests": sent if counting else None,
            "requests_first_batch": produced - self._requests_before if counting and produced is not None else None,
            # the gathering thread failed (its error is not the run's): ask again, here
            "config": config.to_dict(), "env": env_snapshot(), **(self._facts or provenance()),
            "started": self.started, "finished": utc_iso(),
        })
        if save_state and (error is None or pulled):  # after a failure: where the batches handed over end
            try:
                write_atomic(save_state, orjson.dumps(loader.state_dict()) + b"\n")
                result["saved_state"] = save_state
            except OSError as exc:
                error = output_error("save the loader state to", save_state, exc)
                result.update(ok=False, error=error_record(error))
        if isinstance(self.resume, list):  # every rank's state of another world: this rank's share of what they left
            plan = self.loader.pipeline.documents.plan
            result["resumed_from"] = {"states": len(self.resume), "position": self.loader.pipeline.start or None,
                                      "plan": plan.to_dict() if plan is not None else None}
        elif self.resume is not None:
            result["resumed_from"] = {"batches": self.resume.get("batches"), "position": self.resume.get("position")}
        if save_path and pulled:
            failure = _save(save_path, pulled, config)
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


def _save(path: str, pulled: list[np.ndarray], config: LoaderConfig) -> OutputError | None:
    """Write the pulled batches to `path` (.npz content under exactly that name: np.savez given a name would add
    .npz to any other), atomically; the OutputError naming the path when it cannot be written."""
    buffer = io.BytesIO()
    np.savez(buffer, batches=np.stack(pulled), config=np.frombuffer(str(config.to_dict()).encode(), np.uint8))
    try:
        write_atomic(path, buffer.getvalue())
    except OSError as exc:
        return output_error("save batches to", path, exc)
    return None


def _result(config: LoaderConfig, stats: dict, pulled: list[np.ndarray], error: Exception | None,
            elapsed: float) -> dict:
    """The smoke result's measured part (keys in the artifact's order; SmokeRun.finish adds context after them)."""
    tok = stats["tokenizer"]
    checks = check_batches(pulled, config, tok["vocab_size"], tok["eos_id"]) if pulled and tok else []
    if error is None and not pulled:
        checks.append({"name": "batches", "ok": False, "detail": "the source ended before one full batch"})
    tokens = sum(int(b.size) for b in pulled)
    return {
        "ok": error is None and bool(pulled) and all(c["ok"] for c in checks),
        "first_batch_s": stats["first_batch_s"],
        "batches": len(pulled),
        "shape": [config.batch_size, config.seq_len],
        "dtype": "int32",
        "tokens": tokens,
        "tokens_per_s": round(tokens / elapsed, 1) if tokens else 0.0,
        # HTTP requests sent through huggingface_hub (Hub source or Hub tokenizer); None when no Hub was involved
        "requests": None,
        "requests_first_batch": None,  # of those, sent before the first batch was produced
        "tokenizer": tok,
        "source": stats["source"],
        "fallback": stats["fallback"],
        "warmup": stats["warmup"],
        "checks": checks,
        "error": None if error is None else error_record(error, stats["stage"]),
        "loader": stats,
    }

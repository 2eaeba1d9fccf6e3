"""Phase 0 measurements: cold vs warm first-batch latency (split into phases) and steady-state fetch latency.

Every run is a fresh interpreter (`fwe_cli.measure.child`), so imports, tokenizer load and the Hub handshake are
inside the figure. Cold: a new, empty Hugging Face cache (HF_HOME, HF_HUB_CACHE, HF_DATASETS_CACHE in a fresh
temporary folder) and, for local files, their pages dropped from the page cache (posix_fadvise DONTNEED; the run
records whether that was possible). Warm: the same run again with the caches the cold run left. `fwe tune` reuses
`spawn_run` for its trials.

No run outlives its command: `spawn_run` stops and reaps the run whenever it returns or raises (run_timeout,
KeyboardInterrupt from Ctrl-C/SIGTERM, any error), and the run dies with the command even on kill -9
(`fwe_cli.measure.child.die_with_parent`, PR_SET_PDEATHSIG on Linux).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import orjson

import fwe_cli
from fwe_cli.artifacts import error_record, provenance, utc_iso, write_output
from fwe_cli.errors import ConfigError, FweError, KpiMissed, RunFailed, RunsFailed, SourceError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.variables import env_snapshot
from fwe_cli.loader.sources.registry import open_source
from fwe_cli.measure.child import PARENT_PID_VAR, STORAGE_OPTIONS_VAR
from fwe_cli.measure.plan import RunEvent, RunPlan
from fwe_cli.measure.stall_split import pooled, stall_line
from fwe_cli.measure.warmup import combine

STOP_GRACE_S = 5.0
CHILD = "import time; t0 = time.time(); from fwe_cli.measure.child import main; main(t0)"
RUN_KEYS = ("first_batch_s", "phases", "requests", "requests_by_phase", "hub_requests", "peak_rss_mb", "error",
            "test_hook", "warmup_advice")
STEADY_KEYS = ("fetch_p50_ms", "fetch_p95_ms", "fetch_p99_ms", "fetch_max_ms", "stall_fraction", "tokens_per_s",
               "docs_per_s", "mean_queue_fill", "cpu_percent", "steps", "wall_s", "stalled_steps", "first_stalled_step")
LOADER_KEYS = ("tokenizer", "tokenizer_threads", "stall_by_stage_s", "warmup", "sources", "cropped")
"""What a run record takes from the run's loader stats; `sources`: each source's weight, documents and tokens (a
mix's, or the one source's), as every --json result's `loader.sources`; `cropped`: the tokens and documents the
rows' packing cropped."""


class RunTimeout(FweError):
    """A measured run did not finish within the plan's run_timeout (the subprocess was killed)."""


class ChildCrashed(FweError):
    """A measured run's process ended without writing its result."""


@dataclass(frozen=True)
class MeasurePlan(RunPlan):
    """What `fwe measure` runs: cold and/or warm runs, `repeats` sequences of them, each with its own fresh cache."""

    cold: bool = True
    """Run with empty caches (fresh HF cache, local file pages dropped)."""
    warm: bool = True
    """Run again with the caches left behind (after a priming run when there is no cold run)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.cold or self.warm):
            raise ConfigError("nothing to measure: give --cold, --warm or both")


def drop_page_cache(config: LoaderConfig) -> dict:
    """Evict the local source's files (and a tokenizer.json) from the page cache; say what was done."""
    try:
        paths = open_source(config.source, config.read_options()).local_files()
    except SourceError as exc:  # an InputError (a FIFO, a damaged part) is the run's usage error: it propagates
        return {"done": False, "files": 0, "detail": str(exc)}
    if config.tokenizer and os.path.isfile(config.tokenizer):
        paths.append(config.tokenizer)
    if not paths:
        return {"done": None, "files": 0, "detail": "no local files to evict"}
    if not hasattr(os, "posix_fadvise"):
        return {"done": False, "files": 0, "detail": "posix_fadvise is not available on this platform"}
    dropped, failed = 0, []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd) if os.access(path, os.W_OK) else None
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                dropped += 1
            finally:
                os.close(fd)
        except OSError as exc:
            failed.append(f"{path}: {exc.strerror}")
    return {"done": not failed, "files": dropped, "detail": "; ".join(failed[:3]) or "posix_fadvise DONTNEED"}


def fresh_cache_env(root: str) -> dict[str, str]:
    return {"HF_HOME": root, "HF_HUB_CACHE": os.path.join(root, "hub"),
            "HF_DATASETS_CACHE": os.path.join(root, "datasets"), "HF_XET_CACHE": os.path.join(root, "xet")}


def stop_child(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """End a run's process and reap it: SIGTERM, then SIGKILL if it is still there after grace_s (a bounded wait on
    the process itself). Closes its pipes. A no-op for a process that has already been reaped."""
    try:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    except BaseException:  # a second Ctrl-C while waiting: kill without waiting (PDEATHSIG is the backstop)
        proc.kill()
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def first_failure(records: list[dict]) -> str | None:
    """'TYPE: first line of its message' of the first record with an error (None when none failed): what the
    command's one error line quotes, so it names the file or endpoint that failed."""
    for record in records:
        error = record.get("error")
        if error:
            first = (str(error.get("message") or "").strip().splitlines() or [""])[0]
            return f"{error.get('type') or 'error'}: {first}" if first else str(error.get("type") or "error")
    return None


def failed_runs(kind: type[RunsFailed], records: list[dict], noun: str) -> RunsFailed | None:
    """`kind` (RunFailed, TrialFailed) for the records that failed, in one line quoting the first ('2 of 4 runs
    failed; first: SourceError: /data/x.jsonl: ...'); None when none failed."""
    failed = [record for record in records if record.get("error")]
    if not failed:
        return None
    return kind(f"{len(failed)} of {len(records)} {noun} failed; first: {first_failure(failed)}",
                [record["error"] for record in failed])


def measure_outcome(summary: dict, fail_on_kpi: bool) -> FweError | None:
    """Why `fwe measure` ends badly: failed runs (RunFailed), else a missed target with fail_on_kpi (KpiMissed);
    None when it measured what it was asked to."""
    failure = failed_runs(RunFailed, summary["runs"], "runs")
    if failure is None and fail_on_kpi and not summary["verdict"]["pass"]:
        failure = KpiMissed("a target was missed (--fail-on-kpi)")
    return failure


def spawn_run(config: LoaderConfig, kind: str, run_dir: str, plan: RunPlan, env: dict[str, str] | None = None) -> dict:
    """One measured run in a fresh interpreter; returns its record (error filled in when it failed)."""
    spec_path, result_path = os.path.join(run_dir, "spec.json"), os.path.join(run_dir, "result.json")
    child_env = dict(os.environ)
    child_env.update(env or {})
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(fwe_cli.__file__)))
    child_env["PYTHONPATH"] = package_root + os.pathsep + child_env.get("PYTHONPATH", "")
    record: dict = {"kind": kind, "run_dir": run_dir, "heartbeat": os.path.join(run_dir, f"heartbeat_rank{config.rank}.jsonl")}
    spawn_wall = time.time()
    # the config as the child builds it: the one JSON form, with the run's own heartbeat folder
    spec = orjson.dumps({"config": dict(config.to_json(), heartbeat_dir=run_dir), "steps": plan.steps, "step_ms": plan.step_ms, "trial_s": plan.trial_s,
                         "spawn_wall": spawn_wall, "result_path": result_path})
    write_output(spec_path, spec)  # OutputError (one line, exit 8) when the artifacts folder stops taking files
    child_env[PARENT_PID_VAR] = str(os.getpid())  # the child dies with this process (see child.die_with_parent)
    if config.storage_options:  # the spec (a file under artifacts) holds them redacted: the child gets them whole here
        child_env[STORAGE_OPTIONS_VAR] = orjson.dumps(list(config.storage_options)).decode()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, spec_path], env=child_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = proc.communicate(timeout=plan.run_timeout)
    except subprocess.TimeoutExpired:
        record["error"] = error_record(RunTimeout(f"run did not finish within {plan.run_timeout:g} s"))
        return record
    finally:  # timeout, Ctrl-C/SIGTERM (KeyboardInterrupt) or any error here: the run never outlives this call
        stop_child(proc)
    if not os.path.isfile(result_path):
        tail = (stderr or "").strip().splitlines()[-3:]
        record["error"] = error_record(ChildCrashed(f"exit {proc.returncode}: {' | '.join(tail)}"))
        return record
    result = orjson.loads(open(result_path, "rb").read())
    record.update({key: result.get(key) for key in RUN_KEYS})
    record.update({key: (result.get("steady") or {}).get(key) for key in STEADY_KEYS})
    record.update({key: (result.get("loader") or {}).get(key) for key in LOADER_KEYS})
    return record


def verdict(runs: list[dict], targets: dict[str, float]) -> dict:
    """Each target against the worst measured run of its kind; failed runs fail the verdict."""
    checks = []
    ok_runs = [r for r in runs if not r.get("error") and r["kind"] != "prime"]
    for kind in ("cold", "warm"):
        values = [r["first_batch_s"] for r in ok_runs if r["kind"] == kind]
        if values:
            limit = targets[f"{kind}_first_batch_s"]
            checks.append({"target": f"{kind}_first_batch_s", "limit": limit, "value": max(values),
                           "pass": max(values) < limit})
    p95s = [r["fetch_p95_ms"] for r in ok_runs if r.get("fetch_p95_ms") is not None]
    if p95s:
        checks.append({"target": "fetch_p95_ms", "limit": targets["fetch_p95_ms"], "value": max(p95s),
                       "pass": max(p95s) < targets["fetch_p95_ms"]})
    failed = [r for r in runs if r.get("error")]
    if failed:
        checks.append({"target": "runs_completed", "limit": len(runs), "value": len(runs) - len(failed), "pass": False})
    return {"pass": bool(checks) and all(c["pass"] for c in checks), "checks": checks}


def run_measure(config: LoaderConfig, plan: MeasurePlan, out_dir: str,
                on_run: Callable[[RunEvent], None] = lambda event: None) -> dict:
    """Run the plan; write each run's files under out_dir; return the summary (not yet written). `on_run` hears
    each run start and end (live progress)."""
    started = utc_iso()
    runs: list[dict] = []
    sequence = (["cold"] if plan.cold else ["prime"]) + (["warm"] if plan.warm else [])
    total = plan.repeats * len(sequence)
    for repeat in range(plan.repeats):
        cache_root = tempfile.mkdtemp(prefix="fwe-hf-cache-")
        env = fresh_cache_env(cache_root)
        try:
            for kind in sequence:
                page_cache = drop_page_cache(config) if kind != "warm" else {"done": None, "detail": "kept warm"}
                index = len(runs)
                on_run(RunEvent("start", index, total, kind))
                run_dir = os.path.join(out_dir, f"run{index:02d}-{kind}")
                record = spawn_run(config, kind, run_dir, plan, env)
                record.update(repeat=repeat, page_cache_dropped=page_cache, hf_cache="fresh" if kind != "warm" else "reused")
                runs.append(record)
                on_run(RunEvent("done", index, total, kind, record))
        finally:
            shutil.rmtree(cache_root, ignore_errors=True)
    measured = [r for r in runs if r["kind"] != "prime"]
    split = pooled(measured)
    return {
        "runs": runs,
        "verdict": verdict(runs, plan.targets),
        "stall_split": split and dict(split, line=stall_line(split, config.source.kind)),
        "warmup_advice": combine([r["warmup_advice"] for r in measured if not r.get("error") and r.get("warmup_advice")]),
        "targets": plan.targets,
        "plan": plan.to_dict(),
        "config": config.to_json(), "env": env_snapshot(), **provenance(), "started": started,
        "finished": utc_iso(),
    }

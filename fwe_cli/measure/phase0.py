"""Phase 0 measurements: cold vs warm first-batch latency (split into phases) and steady-state fetch latency.

Every run is a fresh interpreter (`fwe_cli.measure.child`), so imports, tokenizer load and the Hub handshake are
inside the figure. Cold: a new, empty Hugging Face cache (HF_HOME, HF_HUB_CACHE, HF_DATASETS_CACHE in a fresh
temporary folder) and, for local files, their pages dropped from the page cache (posix_fadvise DONTNEED; the run
records whether that was possible). Warm: the same run again with the caches the cold run left. `fwe tune` reuses
`spawn_run` for its trials.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import orjson

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.loader.config import LoaderConfig, env_snapshot
from fwe_cli.errors import ConfigError, SourceError
from fwe_cli.hostinfo import host_facts, package_versions
from fwe_cli.loader.sources.local import resolve_files

DEFAULT_TARGETS = {"cold_first_batch_s": 10.0, "warm_first_batch_s": 5.0, "fetch_p95_ms": 100.0}
CHILD = "import time; t0 = time.time(); from fwe_cli.measure.child import main; main(t0)"
RUN_KEYS = ("first_batch_s", "phases", "requests", "requests_by_phase", "peak_rss_mb", "error",
            "test_hook")
STEADY_KEYS = ("fetch_p50_ms", "fetch_p95_ms", "fetch_p99_ms", "fetch_max_ms", "stall_fraction", "tokens_per_s",
               "docs_per_s", "mean_queue_fill", "cpu_percent", "steps", "wall_s")


def parse_targets(text: str | None) -> dict[str, float]:
    """'cold_first_batch_s=8,fetch_p95_ms=80' -> DEFAULT_TARGETS updated; ConfigError naming a bad entry."""
    targets = dict(DEFAULT_TARGETS)
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in DEFAULT_TARGETS:
            raise ConfigError(f"--targets entry {item!r} is not NAME=VALUE with NAME in {', '.join(DEFAULT_TARGETS)}")
        try:
            targets[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--targets entry {item!r}: {value!r} is not a number") from None
    return targets


@dataclass(frozen=True)
class MeasurePlan:
    """What `fwe measure` runs."""

    cold: bool = True
    """Run with empty caches (fresh HF cache, local file pages dropped)."""
    warm: bool = True
    """Run again with the caches left behind (after a priming run when there is no cold run)."""
    steps: int = 200
    """Steady-state steps measured after the first batch."""
    step_ms: float = 0.0
    """Simulated consumer compute per step (sleep), in milliseconds."""
    repeats: int = 1
    """How many cold/warm sequences, each with its own fresh cache."""
    run_timeout: float = 300.0
    """Seconds one run (a whole subprocess) may take before it is killed and reported as a timeout."""
    targets: dict = field(default_factory=lambda: dict(DEFAULT_TARGETS))
    """KPI limits: cold_first_batch_s, warm_first_batch_s, fetch_p95_ms."""

    def __post_init__(self) -> None:
        if not (self.cold or self.warm):
            raise ConfigError("nothing to measure: give --cold, --warm or both")
        for name in ("steps", "repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.step_ms < 0:
            raise ConfigError(f"step_ms must be >= 0, got {self.step_ms!r}")
        if not self.run_timeout > 0:
            raise ConfigError(f"run_timeout must be > 0, got {self.run_timeout!r}")


def drop_page_cache(config: LoaderConfig) -> dict:
    """Evict the local source's files (and a tokenizer.json) from the page cache; say what was done."""
    paths = []
    if config.source == "local":
        try:
            paths += resolve_files(config.local_path, allow_partial=config.allow_partial)
        except SourceError as exc:
            return {"done": False, "files": 0, "detail": str(exc)}
    if os.path.isfile(config.tokenizer):
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


def spawn_run(config: LoaderConfig, kind: str, run_dir: str, steps: int, step_ms: float,
              env: dict[str, str] | None = None, timeout: float = 300.0) -> dict:
    """One measured run in a fresh interpreter; returns its record (error filled in when it failed)."""
    os.makedirs(run_dir, exist_ok=True)
    config = config.replace(heartbeat_dir=run_dir)
    spec_path, result_path = os.path.join(run_dir, "spec.json"), os.path.join(run_dir, "result.json")
    child_env = dict(os.environ)
    child_env.update(env or {})
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(fwe_cli.__file__)))
    child_env["PYTHONPATH"] = package_root + os.pathsep + child_env.get("PYTHONPATH", "")
    record: dict = {"kind": kind, "run_dir": run_dir, "heartbeat": os.path.join(run_dir, f"heartbeat_rank{config.rank}.jsonl")}
    spawn_wall = time.time()
    with open(spec_path, "wb") as handle:
        handle.write(orjson.dumps({"config": config.to_dict(), "steps": steps, "step_ms": step_ms,
                                   "spawn_wall": spawn_wall, "result_path": result_path}))
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, spec_path], env=child_env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        record["error"] = {"type": "RunTimeout", "message": f"run did not finish within {timeout:g} s", "stage": None}
        return record
    if not os.path.isfile(result_path):
        tail = (proc.stderr or "").strip().splitlines()[-3:]
        record["error"] = {"type": "ChildCrashed", "message": f"exit {proc.returncode}: {' | '.join(tail)}", "stage": None}
        return record
    result = orjson.loads(open(result_path, "rb").read())
    record.update({key: result.get(key) for key in RUN_KEYS})
    record.update({key: (result.get("steady") or {}).get(key) for key in STEADY_KEYS})
    record["tokenizer"] = (result.get("loader") or {}).get("tokenizer")
    record["tokenizer_threads"] = (result.get("loader") or {}).get("tokenizer_threads")
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
                progress: Callable[[str], None] = lambda message: None) -> dict:
    """Run the plan; write each run's files under out_dir; return the summary (not yet written)."""
    started = utc_iso()
    runs: list[dict] = []
    for repeat in range(plan.repeats):
        cache_root = tempfile.mkdtemp(prefix="fwe-hf-cache-")
        env = fresh_cache_env(cache_root)
        try:
            sequence = (["cold"] if plan.cold else ["prime"]) + (["warm"] if plan.warm else [])
            for kind in sequence:
                page_cache = drop_page_cache(config) if kind != "warm" else {"done": None, "detail": "kept warm"}
                progress(f"repeat {repeat + 1}/{plan.repeats}: {kind} run")
                run_dir = os.path.join(out_dir, f"run{len(runs):02d}-{kind}")
                record = spawn_run(config, kind, run_dir, plan.steps, plan.step_ms, env, plan.run_timeout)
                record.update(repeat=repeat, page_cache_dropped=page_cache, hf_cache="fresh" if kind != "warm" else "reused")
                runs.append(record)
        finally:
            shutil.rmtree(cache_root, ignore_errors=True)
    return {
        "runs": runs,
        "verdict": verdict(runs, plan.targets),
        "targets": plan.targets,
        "plan": {"cold": plan.cold, "warm": plan.warm, "steps": plan.steps, "step_ms": plan.step_ms,
                 "repeats": plan.repeats, "run_timeout": plan.run_timeout},
        "config": config.to_dict(), "env": env_snapshot(), "host": host_facts(), "versions": package_versions(),
        "fwe_version": fwe_cli.__version__, "started": started,
        "finished": utc_iso(),
    }

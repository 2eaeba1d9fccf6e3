"""One measured loader run in a fresh interpreter (spawned by `fwe measure` / `fwe tune`, not run by hand).

The parent starts `python -c "import time; t0 = time.time(); from fwe_cli.measure.child import main; main(t0)" SPEC`,
so interpreter start, imports, tokenizer load and the Hub handshake all fall inside the measurement. SPEC is a
JSON file: {"config": LoaderConfig.to_json(), "steps", "step_ms", "trial_s", "spawn_wall", "result_path"}. The result (JSON)
goes to result_path; the exit code is 0 even when the loader failed (the error is in the result).

First-batch phases are consecutive differences of milestones, so they add up to first_batch_s exactly:
interpreter_start (spawn -> first line) | imports | tokenizer_ready | source_opened | first_document |
first_batch (producer emitted batch 1) | warmup_filled (warmup wait, then the hand-off to the consumer).

Test hook (fwe's own tests only): FWE_TEST_SLOW_DOC_BATCH=<doc batch>:<ms> slows that doc batch value's tokenize
calls in this process and counts them (test_hook.slowed_calls in the result); see `_plant_slow_doc_batch`.

Lifetime: the run dies with its parent (`die_with_parent`, first thing in `main`); the parent also stops and reaps
it on Ctrl-C, SIGTERM, any error and run_timeout (`fwe_cli.measure.cold_warm.stop_child`).
"""

import os
import threading
import time

PHASES = ("interpreter_start", "imports", "tokenizer_ready", "source_opened", "first_document", "first_batch",
          "warmup_filled")
SLOW_DOC_BATCH_HOOK = "FWE_TEST_SLOW_DOC_BATCH"
TEST_HOOK_VARS = (SLOW_DOC_BATCH_HOOK,)
PARENT_PID_VAR = "FWE_MEASURE_PARENT_PID"
STORAGE_OPTIONS_VAR = "FWE_MEASURE_STORAGE_OPTIONS"  # the config's storage options, secrets included (JSON list)


def _plant_slow_doc_batch(doc_batch: int) -> dict | None:
    """TEST HOOK, for `fwe tune`'s acceptance test only: FWE_TEST_SLOW_DOC_BATCH=<doc batch>:<ms> makes every
    tokenize call of a run whose doc_batch equals <doc batch> sleep <ms> first. Read here, in the measurement
    child, and nowhere else: a training job's loader never sees it."""
    raw = os.environ.get(SLOW_DOC_BATCH_HOOK)
    if not raw:
        return None
    from fwe_cli.errors import ConfigError
    from fwe_cli.loader.pipeline.producer import Pipeline

    value, _, ms = raw.partition(":")
    try:
        slow_doc_batch, delay_s = int(value), float(ms) / 1000.0
    except ValueError:
        raise ConfigError(f"{SLOW_DOC_BATCH_HOOK}={raw!r} is not <doc batch>:<ms per doc batch>") from None
    if doc_batch != slow_doc_batch:
        return None
    encode = Pipeline._encode
    lock = threading.Lock()  # tokenizer threads may call it concurrently
    record = {"var": SLOW_DOC_BATCH_HOOK, "doc_batch": slow_doc_batch, "ms_per_doc_batch": delay_s * 1000.0,
              "slowed_calls": 0}

    def slowed(self, texts):
        time.sleep(delay_s)
        with lock:
            record["slowed_calls"] += 1
        return encode(self, texts)

    Pipeline._encode = slowed
    return record


def _steady(loader, steps: int, step_ms: float, min_s: float = 0.0) -> dict:
    """Pull `steps` batches (more until `min_s` seconds have passed), sleeping `step_ms` after each as a training
    step would compute. The stall fraction (time blocked in next() over the wall time) exists only against a step
    time: with step_ms 0 every wait would count as a stall, so it is None then."""
    import numpy as np
    import psutil

    from fwe_cli.errors import EndOfData
    from fwe_cli.loader.pipeline.quantiles import Quantiles
    from fwe_cli.measure.warmup import StalledSteps

    proc = psutil.Process()
    blocked, stalled, fill_total = Quantiles(), StalledSteps(), 0  # of a fixed size, however many steps
    docs0, cpu0, t0 = loader.pipeline.docs, proc.cpu_times(), time.perf_counter()
    pulled = 0
    while blocked.count < steps or time.perf_counter() - t0 < min_s:
        fill = loader._prefetcher.qsize() if loader._prefetcher is not None else 0
        s = time.perf_counter()
        try:
            batch = loader.next_batch()
        except EndOfData:
            break
        wait = time.perf_counter() - s
        blocked.add(wait)
        stalled.note(fill, wait)
        fill_total += fill
        pulled += int(np.prod(batch.shape))
        if step_ms:
            time.sleep(step_ms / 1000.0)
    wall = time.perf_counter() - t0
    cpu1 = proc.cpu_times()
    lat = blocked.percentiles_ms()
    return {
        "steps": blocked.count, "wall_s": round(wall, 6),
        "fetch_p50_ms": lat["p50"], "fetch_p95_ms": lat["p95"], "fetch_p99_ms": lat["p99"], "fetch_max_ms": lat["max"],
        "stall_fraction": round(blocked.total / wall, 6) if wall and step_ms else None,
        "tokens_per_s": round(pulled / wall, 1) if wall else None,
        "docs_per_s": round((loader.pipeline.docs - docs0) / wall, 2) if wall else None,
        "mean_queue_fill": round(fill_total / blocked.count, 3) if blocked.count else None,
        "cpu_percent": round(100 * ((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)) / wall, 1) if wall else None,
        "stalled_steps": stalled.count, "first_stalled_step": stalled.first,
    }


def _warmup_advice(result: dict, loader, step_ms: float) -> None:
    """The producer's timeline (when each batch was queued, seconds from the loader's start, and how long its put
    waited) and the warmup it says this run needed (measure.warmup); nothing without prefetch (no queue)."""
    from fwe_cli.measure.warmup import advise_warmup, work_times

    if loader._prefetcher is None:
        return
    produced = list(loader._prefetcher.produced)
    result["produced"] = [[round(queued - loader.created, 6), round(wait, 6)] for queued, wait in produced]
    advice = advise_warmup(work_times(produced, loader.created), step_ms / 1000.0, 1 + result["steady"]["steps"],
                           loader.config.queue_depth)
    result["warmup_advice"] = advice.to_dict()


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG), so a run never
    outlives an `fwe measure`/`fwe tune` that was killed (even by SIGKILL, when its own cleanup cannot run). The
    parent passes its pid in FWE_MEASURE_PARENT_PID: a parent that died before the prctl took effect left this
    process adopted by another, and it exits at once. Elsewhere a no-op (the parent still stops its runs on
    Ctrl-C, SIGTERM and errors). PDEATHSIG follows the parent *thread* that started this process: the parent
    spawns runs from its main thread."""
    import sys

    expected = os.environ.get(PARENT_PID_VAR, "")
    if not sys.platform.startswith("linux") or not expected.isdigit():
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != int(expected):
        os._exit(1)


def main(t0_wall: float) -> None:
    import importlib
    import sys

    die_with_parent()

    import orjson

    perf_at_t0 = time.perf_counter() - (time.time() - t0_wall)  # t0_wall on this process's perf_counter clock
    spec = orjson.loads(open(sys.argv[1], "rb").read())
    from fwe_cli.artifacts import error_record
    from fwe_cli.errors import FweError
    from fwe_cli.loader.config import LoaderConfig
    from fwe_cli.loader.fineweb_loader import FineWebLoader
    from fwe_cli.measure.hub_requests import hub_requests, requests_sent, start_counting, uses_hub

    config = LoaderConfig.from_json(spec["config"])
    if os.environ.get(STORAGE_OPTIONS_VAR):  # the spec's are redacted (LoaderConfig.to_json)
        config = config.replace(storage_options=tuple(orjson.loads(os.environ[STORAGE_OPTIONS_VAR])))
    counting = False
    for module in config.source.heavy_imports():  # part of the imports phase (datasets for its reader)
        importlib.import_module(module)
    if uses_hub(config):
        counting = start_counting()
    t_imports = time.perf_counter()
    sent_at_imports = requests_sent()
    result: dict = {"error": None}
    try:
        result["test_hook"] = _plant_slow_doc_batch(config.doc_batch)
    except FweError as exc:
        result["error"] = error_record(exc)
        with open(spec["result_path"], "wb") as handle:
            handle.write(orjson.dumps(result))
        return
    loader = FineWebLoader(config)
    try:
        if config.warmup_batches:
            loader.warmup()
        loader.next_batch()
        t_first = time.perf_counter()
        sent_at_first = requests_sent()
        marks = loader.pipeline.marks
        edges = [perf_at_t0 + (spec["spawn_wall"] - t0_wall), perf_at_t0, t_imports]
        for name in ("tokenizer_ready", "source_opened", "first_document", "first_batch"):
            edges.append(max(marks.get(name, edges[-1]), edges[-1]))
        edges.append(t_first)
        result["phases"] = {name: round(b - a, 6) for name, a, b in zip(PHASES, edges, edges[1:])}
        result["first_batch_s"] = round(t_first - edges[0], 6)
        if counting:  # the count at each edge (none before the process ran), as the times above
            counts = [0, 0, sent_at_imports]
            for name in ("tokenizer_ready", "source_opened", "first_document", "first_batch"):
                counts.append(max(loader.pipeline.requests_at.get(name, counts[-1]), counts[-1]))
            counts.append(sent_at_first)
            result["requests_by_phase"] = {name: b - a for name, a, b in zip(PHASES, counts, counts[1:])}
        else:
            result["requests_by_phase"] = None
        if spec["step_ms"]:  # the training step on the first batch, before the second is asked for (as in training)
            time.sleep(spec["step_ms"] / 1000.0)
        result["steady"] = _steady(loader, spec["steps"], spec["step_ms"], spec["trial_s"])
        _warmup_advice(result, loader, spec["step_ms"])
    except FweError as exc:
        result["error"] = error_record(exc)
    finally:
        loader.close()
    import resource

    result["requests"] = requests_sent() if counting else None
    result["hub_requests"] = hub_requests() if counting else None  # by kind: resolver, API, CDN
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["loader"] = loader.stats()
    with open(spec["result_path"], "wb") as handle:
        handle.write(orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY))

"""Benchmark: the timing claims of `fwe measure` and `fwe tune` on this node, as JSON (they depend on wall time,
so they live here, not in the test suite).

1. stall ordering: with no compute per step (--step-ms 0) the loader is the bottleneck (stall fraction high); with a
   consumer slower than the producer (--step-ms 25) the stall fraction is far lower.
2. planted slow setting: a tune sweep with one doc batch value slowed by FWE_TEST_SLOW_DOC_BATCH ranks it far
   below the others, and neither recommends it nor counts it as tied with the best.

    python -m scripts.bench.measure_claims [--out artifacts/bench]

Each claim is recorded with its figures and `holds` (true/false) in artifacts/bench/measure_claims-<UTC>.json;
the exit code is 1 when one does not hold.
"""

from __future__ import annotations

import os
import tempfile

from fwe_cli.loader.config import resolve_config
from fwe_cli.measure.cold_warm import MeasurePlan, run_measure
from fwe_cli.measure.tune import TunePlan, run_tune
from scripts.bench import harness
from scripts.bench.harness import say

NAME = "measure_claims"
SLOW_DOC_BATCH, SLOW_MS = 16, 100


def stall_ordering(work: str) -> dict:
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=1024, batch_size=8, queue_depth=4)
    stall = {}
    for step_ms in (0.1, 25.0):  # a step far shorter than a batch takes to make, and one far longer
        summary = run_measure(config, MeasurePlan(cold=True, warm=False, steps=40, step_ms=step_ms),
                              os.path.join(work, f"stall-{step_ms:g}"))
        stall[step_ms] = summary["runs"][0]["stall_fraction"]
    loader_bound, compute_bound = stall[0.1], stall[25.0]
    holds = loader_bound > 0.5 and compute_bound < 0.5 * loader_bound and compute_bound < 0.2
    return {"loader_bound_stall": loader_bound, "compute_bound_stall": compute_bound, "holds": holds}


def planted_slow_setting(work: str) -> dict:
    os.environ["FWE_TEST_SLOW_DOC_BATCH"] = f"{SLOW_DOC_BATCH}:{SLOW_MS}"
    try:
        config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=1024, batch_size=8)
        plan = TunePlan(doc_batches=(SLOW_DOC_BATCH, 32), queue_depths=(1, 4), steps=20, repeats=2, budget_s=240,
                        objective="tokens_per_s", step_ms=0.0, trial_s=1.0)
        summary = run_tune(config, plan, os.path.join(work, "tune"))
    finally:
        del os.environ["FWE_TEST_SLOW_DOC_BATCH"]
    medians = {d: [e["median"] for e in summary["settings"] if e["setting"]["doc_batch"] == d]
               for d in plan.doc_batches}
    rec = summary["recommendation"]
    holds = (rec is not None and max(medians[SLOW_DOC_BATCH]) < 0.5 * min(medians[32])
             and rec["setting"]["doc_batch"] != SLOW_DOC_BATCH
             and all(s["doc_batch"] != SLOW_DOC_BATCH for s in rec["indistinguishable"]))
    return {"medians_tokens_per_s": medians, "recommended": rec and rec["setting"], "holds": holds}


def parser():
    return harness.bench_parser(NAME, __doc__)


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    with tempfile.TemporaryDirectory(prefix="fwe-bench-") as work:
        claims = {"stall_ordering": stall_ordering(work), "planted_slow_setting": planted_slow_setting(work)}
    harness.write_result(NAME, args, {"claims": claims})
    for name, claim in claims.items():
        say(f"{name}: {'holds' if claim['holds'] else 'DOES NOT HOLD'}")
    return 0 if all(claim["holds"] for claim in claims.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

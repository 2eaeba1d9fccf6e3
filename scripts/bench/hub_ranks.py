"""Benchmark: how much a many-rank job asks the Hub. 32 ranks of `fwe smoke --source hub` spawned at once as 4 nodes
x 8 ranks (each node: one HF_HOME its ranks share, and a test Hub server of its own, so a server's request log is one
node's), against the test Hub (tests/hubsim, via tests/hubsim/ranks.py).

Runs: cold (empty HF_HOMEs), warm (the same HF_HOMEs again), a cold start into a burst of 429s (each node's server
answers 429 to the first half as many requests as that node sent cold, each distinct request once; every rank must
still start, and the heartbeats' retries show the jittered waits), and, for contrast, a cold start with one HF_HOME
per rank (nothing shared on disk: what a job pays when every rank gets its own cache). Per run: metadata requests
(dataset revision, paths-info, the HEAD checking a branch) per node and in total, all requests, huggingface_hub's own
agent-registry lookups (/api/agent-harnesses) apart, ranks that failed, process wall time; for the burst, the 429s
served and the retries recorded with their waits. Counts are the claim (<= 2 metadata per node cold, <= 1 warm);
wall times are figures from this machine only.

    python -m scripts.bench.hub_ranks [--nodes 4] [--ranks-per-node 8] [--root /tmp/hub] [--out artifacts/bench]

Without --root, small repos (3 MB, 2 shards, as the tests use) are built in a temporary folder first.
Writes artifacts/bench/hub_ranks-<UTC>.json.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from scripts.bench import harness
from scripts.bench.harness import say
from tests.hubsim.ranks import Job, Run, burst_faults, metadata
from tests.hubsim.repos import given_or_built

NAME = "hub_ranks"
AGENT_REGISTRY = "GET /api/agent-harnesses"


def summarise(name: str, run: Run, wall_s: float) -> dict:
    """One run's counts (per node and in total) and its ranks' outcome."""
    per_node = run.metadata_per_node()
    retries = [e for rank in run.ranks for e in rank.events("fineweb_hub_retry")]
    record = {
        "run": name, "ranks": len(run.ranks), "nodes": len(run.requests),
        "metadata_per_node": per_node, "metadata_total": sum(per_node),
        "requests_per_node": [len(records) for records in run.requests],
        "requests_total": sum(len(records) for records in run.requests),
        "agent_registry_lookups": sum(1 for records in run.requests for r in records if r["endpoint"] == AGENT_REGISTRY),
        "ranks_failed": [rank.rank for rank in run.ranks if rank.returncode != 0 or not (rank.result or {}).get("ok")],
        "first_batch_s_median": harness.median(rank.result["first_batch_s"] for rank in run.ranks if rank.result),
        "wall_s": round(wall_s, 3),
        "served_429": sum(1 for records in run.requests for r in records if r["status"] == 429),
        "retries": len(retries),
        "ranks_that_retried": sum(1 for rank in run.ranks if rank.events("fineweb_hub_retry")),
        "retry_waits_s": sorted(e["wait_s"] for e in retries),
        "metadata_endpoints": sorted({r["endpoint"] for records in run.requests for r in records
                                      if metadata([r])}),
    }
    say(f"{name}: metadata per node {per_node} (total {sum(per_node)}), requests {record['requests_total']}, "
        f"failed ranks {record['ranks_failed'] or 'none'}, 429s {record['served_429']}, retries {len(retries)} "
        f"on {record['ranks_that_retried']} ranks, wall {wall_s:.1f} s")
    return record


def timed(job: Job, name: str, **kwargs) -> tuple[Run, float]:
    started = time.perf_counter()
    run = job.run(name, **kwargs)
    return run, time.perf_counter() - started


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--nodes", type=int, default=4, help="Nodes, each an HF_HOME and a server (default 4).")
    parser.add_argument("--ranks-per-node", type=int, default=8, help="Ranks per node (default 8).")
    parser.add_argument("--root", default=None, help="Repos built by `python -m tests.hubsim build` (default: build).")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    nodes, per_node = args.nodes, args.ranks_per_node
    with tempfile.TemporaryDirectory(prefix="bench-hub-ranks-") as tmp:
        workdir = Path(tmp)
        root = given_or_built(args.root, workdir)
        runs = []
        with Job(root, workdir / "shared", nodes, per_node) as job:
            cold, wall = timed(job, "cold")
            runs.append(summarise("cold", cold, wall))
            runs.append(summarise("warm", *timed(job, "warm")))
            job.new_homes()
            faults = [burst_faults(len(records)) for records in cold.requests]
            runs.append(summarise("burst_429", *timed(job, "burst", faults=faults)))
            violations = job.violations()
        with Job(root, workdir / "per_rank", nodes * per_node, 1) as alone:
            contrast = summarise("cold_one_home_per_rank", *timed(alone, "cold"))
            violations += alone.violations()
    by_name = {r["run"]: r for r in runs}
    claims = {"cold_metadata_per_node_le_2": all(n <= 2 for n in by_name["cold"]["metadata_per_node"]),
              "warm_metadata_per_node_le_1": all(n <= 1 for n in by_name["warm"]["metadata_per_node"]),
              "burst_no_rank_failed": not by_name["burst_429"]["ranks_failed"],
              "burst_waits_jittered": len(set(by_name["burst_429"]["retry_waits_s"])) > 1}
    say(f"claims: {claims}")
    harness.write_result(NAME, args, {"kind": "hub_ranks_bench", "nodes": nodes, "ranks_per_node": per_node,
                                      "root": args.root, "runs": runs, "contrast": contrast, "claims": claims,
                                      "sealed_violations": violations})
    return 0 if all(claims.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

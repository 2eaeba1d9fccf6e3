"""Benchmark: the warmup `fwe tune` computes removes the stalled steps of a bursty Hub, at a small cost in first batch.

Against the test Hub (tests/hubsim) through a 50 ms RTT proxy, where about one in --burst-every parquet range reads is
answered --burst-ms late (a Hub whose row groups sometimes come 300 ms late; the same row groups in every run), at a
100 ms training step:

1. `fwe tune` (stall objective, --doc-batch-grid x --q-grid) recommends a setting and the warmup it needed, written
   into fwe.env with the reason, and verified by its own re-run;
2. then, interleaved rep by rep, `fwe measure --cold` of the recommended setting without the warmup ("without") and
   with fwe.env applied ("with"), over the same --steps window: their stalled steps (steps after the first that found
   the queue empty and waited), first batch, and where the waits went (by producer stage).

The claims: without warmup the run stalls in its first steps; with fwe.env none of the steps stalls; the first batch
grows by no more than the warmup's fill time (tune's figure). Each is recorded as true/false per rep, not asserted.
The repos are small with small row groups (--row-group-rows), the Hub cache is off (--no-cache: every run reads from
the network, no head cache), and the tokenizer is the byte one (no download) on one thread, so the reads are what is
measured.

    python -m scripts.bench.warmup [--reps 3] [--steps 40] [--rtt-ms 50] [--burst-ms 300] [--burst-every 5]

Writes artifacts/bench/warmup-<UTC>.json.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import orjson

from scripts.bench import harness
from scripts.bench.harness import median, say
from tests.hubsim.clientenv import client_env
from tests.hubsim.faults import Faults
from tests.hubsim.proxy import RttProxy
from tests.hubsim.repos import BuildSpec, build_repos
from tests.hubsim.server import HubServer

NAME = "warmup"
WARMUP_VARS = ("NSA_FWE_WARMUP_BATCHES", "NSA_FWE_WARMUP_TIMEOUT")


def fwe_json(args: list[str], env: dict, timeout: float = 900.0) -> dict:
    """`fwe ARGS --json` in a fresh process; its JSON object (exit 0 or 6/5 with an object is fine here)."""
    _, proc = harness.run_timed([sys.executable, "-m", "fwe_cli", *args, "--json"], env=env, timeout=timeout)
    if not proc.stdout.strip():
        raise RuntimeError(f"fwe {args[0]} failed ({proc.returncode}): {harness.failure_line(proc)}")
    result = orjson.loads(proc.stdout)
    if result.get("error") and result.get("exit_code") not in (5, 6):
        raise RuntimeError(f"fwe {args[0]} failed ({proc.returncode}): {result['error']}")
    return result


def env_file(path: str) -> dict[str, str]:
    """The NAME=value lines of fwe.env."""
    lines = Path(path).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def run_summary(summary: dict) -> dict:
    """One `fwe measure --cold` run's figures."""
    (run,) = summary["runs"]
    stalled = run.get("stalled_steps")
    return {"stalled_steps": stalled, "first_stalled_step": run.get("first_stalled_step"),
            "first_batch_s": run.get("first_batch_s"), "stall_fraction": run.get("stall_fraction"),
            "fetch_p99_ms": run.get("fetch_p99_ms"), "warmup": run.get("warmup"), "error": run.get("error"),
            "stall_by_stage_s": run.get("stall_by_stage_s"),
            "stall_line": (summary.get("stall_split") or {}).get("line"), "advice": summary.get("warmup_advice")}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=3, help="Interleaved pairs of measure runs (default 3).")
    parser.add_argument("--steps", type=int, default=40, help="Steps per run after the first batch (default 40).")
    parser.add_argument("--step-ms", type=float, default=100.0, help="Training step, ms (default 100).")
    parser.add_argument("--rtt-ms", type=float, default=50.0, help="Added round-trip time, ms (default 50).")
    parser.add_argument("--burst-ms", type=float, default=300.0, help="How late a burst read is, ms (default 300).")
    parser.add_argument("--burst-every", type=int, default=5,
                        help="About one in N parquet range reads is late, the same ones every run (default 5).")
    parser.add_argument("--row-group-rows", type=int, default=4,
                        help="Rows per parquet row group (default 4: about 1.7 batches of 8 x 1024 byte tokens).")
    parser.add_argument("--mb", type=float, default=6.0, help="Size of the test dataset, MB (default 6).")
    parser.add_argument("--doc-batch-grid", default="16,64", help="fwe tune --doc-batch-grid (default 16,64).")
    parser.add_argument("--q-grid", default="4,16", help="fwe tune --q-grid (default 4,16).")
    parser.add_argument("--tune-repeats", type=int, default=3, help="fwe tune --repeats (default 3).")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    with tempfile.TemporaryDirectory(prefix="bench-warmup-") as tmp:
        workdir = Path(tmp)
        root = workdir / "hub"
        build_repos(root, BuildSpec(mb=args.mb, shards=2, row_group_rows=args.row_group_rows))
        faults = Faults(burst_every=args.burst_every, burst_delay_s=args.burst_ms / 1000,
                        burst_match=r"\.parquet range=bytes=")
        with HubServer(root, faults=faults) as hub:
            proxy = RttProxy(("127.0.0.1", hub.port), args.rtt_ms / 1000).start()
            try:
                env = harness.child_env(**client_env(proxy.url, workdir / "hf_home", workdir / "violations.jsonl"))
                # one tokenizer thread: the byte tokenizer is fast, and with a pool the moment a tokenized doc batch
                # is packed races the next read (the timeline, hence the warmup needed, would differ run to run)
                common = ["--source", "hub", "--tokenizer", "byte", "--tokenizer-threads", "1", "--no-cache",
                          "--seq-len", "1024", "--batch", "8", "--steps", str(args.steps),
                          "--step-ms", f"{args.step_ms:g}"]
                say(f"fwe tune over doc batch {args.doc_batch_grid} x Q {args.q_grid} ...")
                tuned = fwe_json(["tune", *common, "--doc-batch-grid", args.doc_batch_grid, "--q-grid", args.q_grid,
                                  "--repeats", str(args.tune_repeats), "--trial-s", "0",
                                  "--artifacts-dir", str(workdir / "tune")], env)
                applied = env_file(tuned["env_file"])
                rec = tuned["recommendation"]
                without = {"NSA_FWE_DOC_BATCH": str(rec["setting"]["doc_batch"]),
                           "NSA_FWE_Q": str(rec["setting"]["queue_depth"])}
                say(f"recommended {rec['label']}; fwe.env: {applied}")

                def measure(extra: dict[str, str], label: str):
                    def one(rep: int) -> dict:
                        summary = fwe_json(["measure", "--cold", *common, "--artifacts-dir",
                                            str(workdir / f"measure-{label}-{rep}")], {**env, **extra})
                        result = run_summary(summary)
                        say(f"  rep {rep} {label}: {result['stalled_steps']} stalled step(s), first batch "
                            f"{result['first_batch_s']:.2f} s; {result['stall_line']}")
                        return result
                    return one

                runs = harness.interleaved(args.reps, {"without": measure(without, "without"),
                                                       "with": measure(applied, "with")})
            finally:
                proxy.stop()
            requests = hub.flush()
        violations = workdir / "violations.jsonl"
        sealed = violations.read_text().splitlines() if violations.exists() else []
    warmup = (tuned.get("warmup") or {})
    fill = (warmup.get("advice") or {}).get("fill_s")
    first_without = median(r["first_batch_s"] for r in runs["without"])
    record = {
        "kind": "warmup_bench", "setup": {"rtt_ms": args.rtt_ms, "burst_ms": args.burst_ms,
                                          "burst_every": args.burst_every, "row_group_rows": args.row_group_rows,
                                          "step_ms": args.step_ms, "steps": args.steps, "mb": args.mb},
        "tune": {"recommendation": {k: rec[k] for k in ("label", "env", "confidence", "reason")},
                 "warmup": warmup, "fwe_env": applied, "artifact": None},
        "without": runs["without"], "with": runs["with"],
        "claims": {
            "without_stalls_in_first_steps": [bool(r["stalled_steps"]) and r["first_stalled_step"] <= 10
                                              for r in runs["without"]],
            "tune_recommends_a_warmup": all(v in applied for v in WARMUP_VARS),
            "with_no_stalled_step": [r["stalled_steps"] == 0 for r in runs["with"]],
            "first_batch_growth_within_fill": [
                fill is not None and first_without is not None and r["first_batch_s"] - first_without <= fill
                for r in runs["with"]],
        },
        "medians": {"first_batch_s_without": first_without,
                    "first_batch_s_with": median(r["first_batch_s"] for r in runs["with"]),
                    "stalled_steps_without": median(r["stalled_steps"] for r in runs["without"]),
                    "stalled_steps_with": median(r["stalled_steps"] for r in runs["with"]), "fill_s": fill},
        "bursts_dealt": sum(1 for r in requests if r.get("fault") == "burst"),
        "sealed_violations": sealed,
    }
    harness.write_result(NAME, args, record)
    say(f"claims: {record['claims']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

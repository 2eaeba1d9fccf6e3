"""Benchmark: are `fwe tune`'s default trials long enough to tell settings apart on this node?

Runs the same sweep twice, interleaving nothing else: with the old trial length (200 steps, no minimum time: a
fast loader was done in ~0.1 s) and with the default (--trial-s 3), and reports for each the steady-state seconds
per trial, the spread of each setting over its repeats (± half the range, % of its median), how many settings
the ranking could tell apart from the best, the confidence, and the sweep's wall time. A timing claim, so a
benchmark and not a test: the figures are this node's.

    python -m scripts.bench.tune_trials [--repeats 3] [--out artifacts/bench]
    python -m scripts.bench.tune_trials --local-path /data/fwe_bootstrap --tokenizer gpt2

Writes artifacts/bench/tune_trials-<UTC>.json.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

import orjson

from scripts.bench import harness
from scripts.bench.harness import say

NAME = "tune_trials"
VARIANTS = {"old_200_steps": ("--steps", "200", "--trial-s", "0"), "default_trial_s_3": ()}


def sweep(source_args: list[str], extra: tuple, work: str, name: str, repeats: int) -> dict:
    out = os.path.join(work, name)
    cmd = [sys.executable, "-m", "fwe_cli", "tune", *source_args, "--objective", "tokens_per_s",
           "--doc-batch-grid", "16,64,256", "--q-grid", "1,8", "--repeats", str(repeats), *extra, "--json",
           "--artifacts-dir", out]
    _, proc = harness.run_timed(cmd, timeout=3600)
    if proc.returncode not in (0, 6):
        raise RuntimeError(f"fwe tune failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = orjson.loads(proc.stdout)
    rec = summary["recommendation"]
    settings = [e for e in summary["settings"] if e["status"] == "ok"]
    return {
        "args": list(extra),
        "wall_s": summary["budget"]["elapsed_s"],
        "steady_s_per_trial_median": statistics.median(t["wall_s"] for t in summary["trials"] if t.get("wall_s")),
        "spread_pct_median": statistics.median(e["spread_pct"] for e in settings if e["spread_pct"] is not None),
        "spread_pct_max": max(e["spread_pct"] for e in settings if e["spread_pct"] is not None),
        "medians_tokens_per_s": {f"doc_batch={e['setting']['doc_batch']} Q={e['setting']['queue_depth']}":
                                 e["median"] for e in settings},
        "told_apart_from_best": sum(1 for e in settings if not e["tied_with_best"]),
        "settings": len(settings),
        "confidence": rec and rec["confidence"],
        "recommended": rec and rec["label"],
    }


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--local-path", help="Sweep this local data instead of the synthetic source.")
    parser.add_argument("--tokenizer", default="byte")
    parser.add_argument("--repeats", type=int, default=3)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    source = ["--local-path", args.local_path] if args.local_path else ["--source", "synthetic"]
    source += ["--tokenizer", args.tokenizer, "--seq-len", "1024", "--batch", "8"]
    with tempfile.TemporaryDirectory(prefix="fwe-bench-tune-") as work:
        results = {name: sweep(source, extra, work, name, args.repeats) for name, extra in VARIANTS.items()}
    harness.write_result(NAME, args, {"source": source, "repeats": args.repeats, "variants": results})
    for name, r in results.items():
        say(f"{name}: {r['steady_s_per_trial_median']:.2f} s/trial, spread ±{r['spread_pct_median']:.1f} % "
            f"(max {r['spread_pct_max']:.1f} %), {r['told_apart_from_best']}/{r['settings']} told apart from the "
            f"best, {r['confidence']}, sweep {r['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

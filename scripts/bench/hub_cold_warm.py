"""Benchmark: `fwe measure --cold --warm --source hub` against the test Hub (tests/hubsim) at added RTTs.

The timing claim that used to be a test (tests/measure/test_hub_measure.py asserted, by wall clock, that the
cold run spends longer in source_opened than the warm run) lives here: a wall-clock comparison flips under CPU
load, so it is a figure, not a pass/fail. The tests keep the cause, which is deterministic: the cold run sends
more requests while opening the source. Per RTT this writes both runs' phases, first_batch_s and request
counts (total and per phase), the cold - warm differences, and `cold_opens_slower` (source_opened cold > warm).
Compare runs made on the same machine only.

    python -m scripts.bench.hub_cold_warm [--rtt-ms 0,30,100] [--repeats 3] [--root /tmp/hub] [--cdn-ttl-s 3600]
                                          [--out artifacts/bench]

With --cdn-ttl-s the Hub redirects its parquet resolves to a CDN's signed URLs valid that long (a second server
behind a proxy adding the same RTT: tests/hubsim/bench.py redirecting_cdn), as the real Hub does; each run's
`hub_requests` (resolver, api, cdn) and steady tokens/s are recorded either way.

Without --root, small repos (3 MB, 2 shards, as the tests use) are built in a temporary folder first.
Writes artifacts/bench/hub_cold_warm-<UTC>.json.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import orjson

from scripts.bench import harness
from scripts.bench.harness import median, say
from tests.hubsim.bench import redirecting_cdn
from tests.hubsim.clientenv import client_env
from tests.hubsim.proxy import RttProxy
from tests.hubsim.repos import given_or_built
from tests.hubsim.server import HubServer

NAME = "hub_cold_warm"


def measure_once(endpoint: str, workdir: Path, name: str, steps: int) -> dict:
    """One `fwe measure --cold --warm` (fresh HF_HOME) against `endpoint`; its JSON summary."""
    home = workdir / f"hf_home_{name}"
    home.mkdir()
    env = harness.child_env(**client_env(endpoint, home, workdir / "violations.jsonl"))
    _, proc = harness.run_timed([sys.executable, "-m", "fwe_cli", "measure", "--cold", "--warm", "--source", "hub",
                                 "--tokenizer", "gpt2", "--steps", str(steps), "--step-ms", "0", "--batch", "2",
                                 "--json", "--artifacts-dir", str(workdir / f"artifacts_{name}")], env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"fwe measure failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return orjson.loads(proc.stdout)


def summarise(rtt_ms: float, summaries: list[dict]) -> dict:
    pairs = [(s["runs"][0], s["runs"][1]) for s in summaries]
    opened = [(c["phases"]["source_opened"], w["phases"]["source_opened"]) for c, w in pairs]
    first = [(c["first_batch_s"], w["first_batch_s"]) for c, w in pairs]
    return {
        "rtt_ms": rtt_ms,
        "repeats": len(pairs),
        "cold_source_opened_s": [c for c, _ in opened], "warm_source_opened_s": [w for _, w in opened],
        "source_opened_cold_minus_warm_s_median": median((c - w for c, w in opened), 6),
        "first_batch_cold_minus_warm_s_median": median((c - w for c, w in first), 6),
        "cold_opens_slower": [c > w for c, w in opened],
        "steady_tokens_per_s_median": {"cold": median((c["tokens_per_s"] for c, _ in pairs), 1),
                                       "warm": median((w["tokens_per_s"] for _, w in pairs), 1)},
        "first_batch_s_median": {"cold": median((c for c, _ in first), 4), "warm": median((w for _, w in first), 4)},
        "hub_requests": [{"cold": c.get("hub_requests"), "warm": w.get("hub_requests")} for c, w in pairs],
        "requests": [{"cold": c["requests"], "warm": w["requests"],
                      "cold_source_opened": c["requests_by_phase"]["source_opened"],
                      "warm_source_opened": w["requests_by_phase"]["source_opened"]} for c, w in pairs],
        "runs": [s["runs"] for s in summaries],
    }


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--rtt-ms", default="0,30,100", help="Comma-separated added RTTs in ms (default 0,30,100).")
    parser.add_argument("--repeats", type=int, default=3, help="fwe measure --cold --warm runs per RTT (default 3).")
    parser.add_argument("--steps", type=int, default=5, help="fwe measure --steps (default 5).")
    parser.add_argument("--root", default=None, help="Repos built by `python -m tests.hubsim build` (default: build).")
    parser.add_argument("--cdn-ttl-s", type=float, default=None, help="Redirect parquet resolves to signed CDN URLs "
                                                                      "valid this long (default: no redirect).")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    rtts = [float(x) for x in args.rtt_ms.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-hub-cold-warm-") as tmp:
        workdir = Path(tmp)
        root = given_or_built(args.root, workdir)
        results = []
        with HubServer(root) as hub:
            for rtt_ms in rtts:
                proxy = RttProxy(("127.0.0.1", hub.port), rtt_ms / 1000).start() if rtt_ms else None
                try:
                    with redirecting_cdn(root, hub, args.cdn_ttl_s, rtt_ms / 1000):
                        summaries = [measure_once(proxy.url if proxy else hub.url, workdir, f"rtt{rtt_ms:g}_{i}",
                                                  args.steps) for i in range(args.repeats)]
                finally:
                    if proxy is not None:
                        proxy.stop()
                results.append(summarise(rtt_ms, summaries))
                say(f"rtt {rtt_ms:g} ms: source_opened cold - warm (median) = "
                    f"{results[-1]['source_opened_cold_minus_warm_s_median']:.3f} s, cold slower in "
                    f"{sum(results[-1]['cold_opens_slower'])}/{args.repeats}; first batch "
                    f"{results[-1]['first_batch_s_median']}, steady tokens/s "
                    f"{results[-1]['steady_tokens_per_s_median']}")
        violations = workdir / "violations.jsonl"
        sealed = violations.read_text().splitlines() if violations.exists() else []
    harness.write_result(NAME, args, {
        "kind": "hub_cold_warm_bench", "claim": "cold source_opened > warm source_opened (wall clock)",
        "root": args.root, "cdn_ttl_s": args.cdn_ttl_s, "results": results, "sealed_violations": sealed})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

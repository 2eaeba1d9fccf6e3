"""Benchmark: fwe's tokens/s against the loaders users would pick instead, and against this machine's ceiling.

One run, one JSONL file, GPT-2's tokenizer.json (built offline by fwe_cli.loader.tokenization.gpt2_vocab), seq_len 1024, batch 8:
  (1) naive     json.loads + tokenizers encode() one document at a time, ids in a Python list (users' loader)
  (2) datasets  datasets streaming JSONL + batched map (tokenizers encode_batch) + torch DataLoader(num_workers=1)
  (3) ceiling   the fastest tokenizer giving the right ids, on pre-read text, all cores, no I/O
  (4) fwe       FineWebLoader with its defaults
  (5) rss       peak RSS of a loader process at seq_len 2048, batch 32, Q 64 (target < 600 MB)

    python -m scripts.bench.throughput [--rounds 5] [--min-mb 80] [--skip naive,datasets,rss] [--out artifacts/bench]

Data: ../shared/fineweb_real/ when present (fineweb_subset.json's records, and fineweb_sample.txt cut at line
ends into documents of FineWeb-like log-normal length), wrapped in the FineWeb-Edu record schema and replicated to
at least --min-mb of JSONL; synthetic records otherwise (scripts.bench.corpus). Every stage is a fresh interpreter
(scripts.bench.throughput_stages). Other work on a small shared machine makes single figures noisy, so (3)
and (4) run in alternating rounds and fwe/ceiling is taken per round; the JSON keeps every round, the median and
the spread. Loader figures are steady state: tokens/s between the batches at 10 % and 90 % of the run (the
end-to-end rate, tokenizer load included, is reported too). All stages must hash to the same id stream.
Targets: fwe >= 0.85 x ceiling, >= 3.5 x datasets, >= 5 x naive; peak RSS < 600 MB.
Writes artifacts/bench/throughput-<UTC>.json; a summary goes to stderr.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile

import orjson

from scripts.bench import harness
from scripts.bench.corpus import build_corpus, gpt2_tokenizer, warm_page_cache
from scripts.bench.harness import say, spread

NAME = "throughput"
TARGETS = {"fwe_vs_ceiling": 0.85, "fwe_vs_datasets": 3.5, "fwe_vs_naive": 5.0, "peak_rss_mb": 600.0}


def run_stage(stage: str, data: str, tokenizer: str, *extra: str, timeout: float = 600) -> dict:
    """One stage of scripts.bench.throughput_stages in a fresh interpreter: its JSON line, plus the process's
    seconds from spawn to exit; {stage, error, returncode} when it failed."""
    cmd = [sys.executable, "-m", "scripts.bench.throughput_stages", stage, "--data", data, "--tokenizer", tokenizer,
           *extra]
    seconds, proc = harness.run_timed(cmd, env=harness.child_env(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1"),
                                      timeout=timeout)
    if proc.returncode != 0:
        return {"stage": stage, "error": harness.failure_line(proc), "returncode": proc.returncode}
    result = orjson.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = seconds
    return result


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--rounds", type=int, default=5, help="alternating ceiling/fwe rounds (default 5)")
    parser.add_argument("--min-mb", type=float, default=80.0,
                        help="JSONL size to replicate the text to (default 80; at least 40 for the issue's figures: "
                             "fwe reads 40 MB in ~2 s here, a short window for a steady rate)")
    parser.add_argument("--synthetic", action="store_true", help="use synthetic text even when real text is present")
    parser.add_argument("--skip", default="", help="comma-separated stages to leave out: naive,datasets,rss")
    parser.add_argument("--slow-stage-seconds", type=float, default=60.0,
                        help="stop the naive and datasets stages after this long (default 60; 0 = never)")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "fwe_bench_data"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    skip = set(filter(None, args.skip.split(",")))
    load_before = os.getloadavg()
    data, kind = build_corpus(args.data_dir, args.min_mb, args.synthetic)
    tokenizer = gpt2_tokenizer(os.path.join(args.data_dir, "gpt2"))
    warm_page_cache(data)
    say(f"data: {data} ({os.path.getsize(data) / 1e6:.1f} MB, {kind})")
    slow = ["--max-seconds", str(args.slow_stage_seconds)]
    results: dict = {}
    if "naive" not in skip:
        results["naive"] = run_stage("naive", data, tokenizer, *slow)
        say(f"naive: {results['naive'].get('steady_tokens_per_s', 0) / 1e6:.3f} M tokens/s")
    if "datasets" not in skip:
        if importlib.util.find_spec("torch") is None:
            results["datasets"] = {"stage": "datasets", "skipped": "torch is not installed (pip install torch)"}
        else:
            results["datasets"] = run_stage("datasets", data, tokenizer, *slow)
        say(f"datasets: {results['datasets'].get('steady_tokens_per_s', 0) / 1e6:.3f} M tokens/s")
    loadavgs: list[tuple] = []

    def after_round(r: int, done: dict) -> None:
        ceiling, fwe = done["ceiling"][r], done["fwe"][r]
        loadavgs.append(os.getloadavg())
        if "error" in ceiling or "error" in fwe:
            raise SystemExit(f"round {r + 1} failed: {ceiling.get('error') or fwe.get('error')}")
        best = ", ".join(f"{k.replace('tiktoken_', '')} {v['tokens_per_s'] / 1e6:.2f}"
                         for k, v in ceiling["candidates"].items())
        say(f"round {r + 1}: ceiling [{best}] fwe {fwe['steady_tokens_per_s'] / 1e6:.2f} M tokens/s "
            f"(backend {fwe['loader']['tokenizer']['backend']}, settled at batch "
            f"{fwe['steady_window']['settled_at_batch']}), loadavg {loadavgs[-1][0]:.1f}")

    done = harness.interleaved(args.rounds, {
        "ceiling": lambda r: run_stage("ceiling", data, tokenizer, *(["--all-candidates"] if r == 0 else [])),
        "fwe": lambda r: run_stage("fwe", data, tokenizer)}, rotate=False, after_rep=after_round)
    rounds = [{"ceiling": c, "fwe": f, "loadavg": load} for c, f, load in zip(done["ceiling"], done["fwe"], loadavgs)]
    if "rss" not in skip:
        results["rss"] = run_stage("rss", data, tokenizer, "--seq-len", "2048", "--batch", "32", "--queue", "64")
        say(f"rss: peak {results['rss'].get('peak_rss_mb', float('nan')):.0f} MB")
    report = summarize(rounds, results)
    report.update(benchmark="throughput", data=kind, data_file=data, data_mb=os.path.getsize(data) / 1e6,
                  tokenizer="gpt2 (fwe_cli.loader.tokenization.gpt2_vocab)", seq_len=1024, batch_size=8, rounds=rounds,
                  stages=results, loadavg_before=load_before, loadavg_after=os.getloadavg())
    path = harness.write_result(NAME, args, report, args.data_dir)
    summary = report["summary"]
    say(f"ceiling method: {summary['ceiling_method']}; fwe/ceiling per round: "
        f"{', '.join(f'{x:.2f}' for x in summary['fwe_over_ceiling_per_round']['all'])}; "
        f"per CPU-second: {', '.join(f'{x:.2f}' for x in summary['fwe_over_ceiling_tokens_per_cpu_s']['all'])}")
    for name, check in report["acceptance"].items():
        say(f"{name}: {check}")
    say(f"ids identical across stages: {report['ids_identical']}  ->  {path}")
    return 0


def summarize(rounds: list[dict], results: dict) -> dict:
    """Ratios per round against one ceiling method: the candidate with the best median over the rounds (taking
    the best candidate of each round would compare fwe's one sample with the maximum of three)."""
    methods = [m for m in rounds[0]["ceiling"]["candidates"] if all(m in r["ceiling"]["candidates"] for r in rounds)]
    method = max(methods, key=lambda m: statistics.median(r["ceiling"]["candidates"][m]["tokens_per_s"] for r in rounds))
    picked = [r["ceiling"]["candidates"][method] for r in rounds]
    ceilings = [c["tokens_per_s"] for c in picked]
    fwes = [r["fwe"]["steady_tokens_per_s"] for r in rounds]
    ratios = [f / c for f, c in zip(fwes, ceilings)]
    cpu_ratios = [r["fwe"]["steady_tokens_per_cpu_s"] / (c["tokens"] / c["cpu_s"]) for r, c in zip(rounds, picked)]
    fwe_med = statistics.median(fwes)
    summary = {"ceiling_method": method, "ceiling_tokens_per_s": spread(ceilings), "fwe_tokens_per_s": spread(fwes),
               "fwe_over_ceiling_per_round": spread(ratios),
               "fwe_over_ceiling_tokens_per_cpu_s": spread(cpu_ratios),
               "fwe_end_to_end_tokens_per_s": spread([r["fwe"]["end_to_end_tokens_per_s"] for r in rounds]),
               "fwe_first_batch_s": spread([r["fwe"]["first_batch_s"] for r in rounds]),
               "fwe_fetch_p95_ms": spread([r["fwe"]["fetch_p95_ms"] for r in rounds]),
               "fwe_fetch_max_ms": spread([r["fwe"]["fetch_max_ms"] for r in rounds]),
               "fwe_windows_after_settling": sum(r["fwe"]["steady_window"]["after_settling"] for r in rounds),
               "fwe_backend_check_s": spread([r["fwe"]["loader"]["tokenizer"].get("check_s") or 0.0 for r in rounds])}
    acceptance = {"fwe_vs_ceiling": {"ratio": statistics.median(ratios), "target": TARGETS["fwe_vs_ceiling"]}}
    for name in ("datasets", "naive"):
        rate = results.get(name, {}).get("steady_tokens_per_s")
        summary[f"{name}_tokens_per_s"] = rate
        if rate:
            acceptance[f"fwe_vs_{name}"] = {"ratio": fwe_med / rate, "target": TARGETS[f"fwe_vs_{name}"]}
            summary[f"{name}_first_batch_s"] = results[name]["first_batch_s"]
            summary[f"{name}_fetch_p95_ms"] = results[name]["fetch_p95_ms"]
            summary[f"{name}_fetch_max_ms"] = results[name]["fetch_max_ms"]
    for check in acceptance.values():
        check["ok"] = check["ratio"] >= check["target"]
    rss = results.get("rss", {}).get("peak_rss_mb")
    if rss is not None:
        acceptance["peak_rss_mb"] = {"value": rss, "target": TARGETS["peak_rss_mb"], "ok": rss < TARGETS["peak_rss_mb"]}
    streams = [r[k] for r in rounds for k in ("ceiling", "fwe")] + [v for v in results.values() if "crc32_prefix" in v]
    prefixes = {s["crc32_prefix"] for s in streams if s.get("crc32_prefix") is not None}
    wholes = {s["crc32"] for s in streams if s.get("crc32") is not None}
    return {"summary": summary, "acceptance": acceptance,
            "ids_identical": {"prefix": len(prefixes) == 1, "whole_stream": len(wholes) == 1,
                              "stages_compared": sorted({s["stage"] for s in streams})}}


if __name__ == "__main__":
    raise SystemExit(main())

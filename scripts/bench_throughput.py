#!/usr/bin/env python3
"""Benchmark: fwe's tokens/s against the loaders users would pick instead, and against this machine's ceiling.

One run, one JSONL file, GPT-2's tokenizer.json (built offline by fwe_cli.loader.tokenization.gpt2_vocab), seq_len 1024, batch 8:
  (1) naive     json.loads + tokenizers encode() one document at a time, ids in a Python list (users' loader)
  (2) datasets  datasets streaming JSONL + batched map (tokenizers encode_batch) + torch DataLoader(num_workers=1)
  (3) ceiling   the fastest tokenizer giving the right ids, on pre-read text, all cores, no I/O
  (4) fwe       FineWebLoader with its defaults
  (5) rss       peak RSS of a loader process at seq_len 2048, batch 32, Q 64 (target < 600 MB)

    python scripts/bench_throughput.py [--rounds 5] [--min-mb 80] [--skip naive,datasets,rss] [--out artifacts/bench]

Data: ../shared/fineweb_real/ when present (fineweb_subset.json's records, and fineweb_sample.txt cut at line
ends into documents of FineWeb-like log-normal length), wrapped in the FineWeb-Edu record schema and replicated to
at least --min-mb of JSONL; synthetic records otherwise. Every stage is a fresh interpreter
(scripts/bench_throughput_stages.py). Other work on a small shared machine makes single figures noisy, so (3)
and (4) run in alternating rounds and fwe/ceiling is taken per round; the JSON keeps every round, the median and
the spread. Loader figures are steady state: tokens/s between the batches at 10 % and 90 % of the run (the
end-to-end rate, tokenizer load included, is reported too). All stages must hash to the same id stream.
Targets: fwe >= 0.85 x ceiling, >= 3.5 x datasets, >= 5 x naive; peak RSS < 600 MB.
Writes artifacts/bench/throughput_<UTC>.json; a summary goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import orjson  # noqa: E402

from fwe_cli.artifacts import utc_stamp, write_json  # noqa: E402
from fwe_cli.loader.tokenization.gpt2_vocab import write_gpt2_tokenizer_json  # noqa: E402
from fwe_cli.hostinfo import host_facts, package_versions  # noqa: E402
from fwe_cli.loader.sources.synthetic import synthetic_record  # noqa: E402

REAL_DIR = os.path.join(ROOT, "..", "shared", "fineweb_real")
STAGES_SCRIPT = os.path.join(ROOT, "scripts", "bench_throughput_stages.py")
TARGETS = {"fwe_vs_ceiling": 0.85, "fwe_vs_datasets": 3.5, "fwe_vs_naive": 5.0, "peak_rss_mb": 600.0}


def real_texts() -> list[str]:
    """fineweb_subset.json's texts, then fineweb_sample.txt cut at line ends into FineWeb-like lengths
    (log-normal, median 1,684 characters, sigma 1.05, as the subset's own distribution)."""
    with open(os.path.join(REAL_DIR, "fineweb_subset.json"), "rb") as handle:
        texts = [record["text"] for record in orjson.loads(handle.read())]
    with open(os.path.join(REAL_DIR, "fineweb_sample.txt"), encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    rng = np.random.default_rng(0)
    target, current, size = 0, [], 0
    for line in lines:
        if not current:
            target = int(np.clip(1684 * np.exp(1.05 * rng.standard_normal()), 200, 40_000))
        current.append(line)
        size += len(line) + 1
        if size >= target:
            texts.append("\n".join(current))
            current, size = [], 0
    if current:
        texts.append("\n".join(current))
    return texts


def build_corpus(directory: str, min_mb: float, synthetic: bool = False) -> tuple[str, str]:
    """A JSONL file of >= min_mb MB of FineWeb-Edu-shaped records; reused when already built. (path, kind)"""
    real = not synthetic and os.path.isfile(os.path.join(REAL_DIR, "fineweb_subset.json")) and os.path.isfile(
        os.path.join(REAL_DIR, "fineweb_sample.txt"))
    kind = "real FineWeb text (../shared/fineweb_real: fineweb_subset.json + fineweb_sample.txt), replicated" \
        if real else "synthetic FineWeb-Edu records (fwe_cli.loader.sources.synthetic)"
    path = os.path.join(directory, f"{'real' if real else 'synthetic'}_{min_mb:g}mb.jsonl")
    if os.path.isfile(path):
        return path, kind
    os.makedirs(directory, exist_ok=True)
    texts = real_texts() if real else None
    target, written, index = min_mb * 1e6, 0, 0
    with open(path + ".tmp", "wb") as handle:
        while written < target:
            record = synthetic_record(0, index)
            if texts is not None:
                text = texts[index % len(texts)]
                record.update(text=text, token_count=max(1, round(len(text) / 4.4)))
            line = orjson.dumps(record) + b"\n"
            handle.write(line)
            written += len(line)
            index += 1
    os.replace(path + ".tmp", path)
    return path, kind


def run_stage(stage: str, data: str, tokenizer: str, *extra: str, timeout: float = 600) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSA_FWE_")}
    env.update(PYTHONPATH=ROOT, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, STAGES_SCRIPT, stage, "--data", data, "--tokenizer", tokenizer, *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        return {"stage": stage, "error": (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1],
                "returncode": proc.returncode}
    result = orjson.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - t0
    return result


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def spread(values: list[float]) -> dict:
    med = statistics.median(values)
    return {"median": med, "min": min(values), "max": max(values),
            "relative_spread": (max(values) - min(values)) / med if med else None, "all": values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating ceiling/fwe rounds (default 5)")
    parser.add_argument("--min-mb", type=float, default=80.0,
                        help="JSONL size to replicate the text to (default 80; at least 40 for the issue's figures: "
                             "fwe reads 40 MB in ~2 s here, a short window for a steady rate)")
    parser.add_argument("--synthetic", action="store_true", help="use synthetic text even when real text is present")
    parser.add_argument("--skip", default="", help="comma-separated stages to leave out: naive,datasets,rss")
    parser.add_argument("--slow-stage-seconds", type=float, default=60.0,
                        help="stop the naive and datasets stages after this long (default 60; 0 = never)")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "fwe_bench_data"))
    parser.add_argument("--out", default=os.path.join(ROOT, "artifacts", "bench"))
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    load_before = os.getloadavg()
    data, kind = build_corpus(args.data_dir, args.min_mb, args.synthetic)
    tokenizer = write_gpt2_tokenizer_json(os.path.join(args.data_dir, "gpt2"))
    with open(data, "rb") as handle:  # warm the page cache: every stage reads the same cached pages
        while handle.read(1 << 24):
            pass
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
    rounds = []
    for r in range(args.rounds):
        ceiling = run_stage("ceiling", data, tokenizer, *(["--all-candidates"] if r == 0 else []))
        fwe = run_stage("fwe", data, tokenizer)
        rounds.append({"ceiling": ceiling, "fwe": fwe, "loadavg": os.getloadavg()})
        if "error" in ceiling or "error" in fwe:
            raise SystemExit(f"round {r + 1} failed: {ceiling.get('error') or fwe.get('error')}")
        best = ", ".join(f"{k.replace('tiktoken_', '')} {v['tokens_per_s'] / 1e6:.2f}"
                         for k, v in ceiling["candidates"].items())
        say(f"round {r + 1}: ceiling [{best}] fwe {fwe['steady_tokens_per_s'] / 1e6:.2f} M tokens/s "
            f"(backend {fwe['loader']['tokenizer']['backend']}, settled at batch "
            f"{fwe['steady_window']['settled_at_batch']}), loadavg {os.getloadavg()[0]:.1f}")
    if "rss" not in skip:
        results["rss"] = run_stage("rss", data, tokenizer, "--seq-len", "2048", "--batch", "32", "--queue", "64")
        say(f"rss: peak {results['rss'].get('peak_rss_mb', float('nan')):.0f} MB")
    report = summarize(rounds, results)
    report.update(benchmark="throughput", data=kind, data_file=data, data_mb=os.path.getsize(data) / 1e6,
                  tokenizer="gpt2 (fwe_cli.loader.tokenization.gpt2_vocab)", seq_len=1024, batch_size=8, rounds=rounds,
                  stages=results, loadavg_before=load_before, loadavg_after=os.getloadavg(),
                  host=host_facts(), versions=package_versions())
    path = write_json(os.path.join(args.out, f"throughput_{utc_stamp()}.json"), report)
    summary = report["summary"]
    say(f"ceiling method: {summary['ceiling_method']}; fwe/ceiling per round: "
        f"{', '.join(f'{x:.2f}' for x in summary['fwe_over_ceiling_per_round']['all'])}; "
        f"per CPU-second: {', '.join(f'{x:.2f}' for x in summary['fwe_over_ceiling_tokens_per_cpu_s']['all'])}")
    for name, check in report["acceptance"].items():
        say(f"{name}: {check}")
    say(f"ids identical across stages: {report['ids_identical']}  ->  {path}")
    print(path)


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
    main()

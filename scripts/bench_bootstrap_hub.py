#!/usr/bin/env python3
"""Benchmark `fwe bootstrap` from the Hub against `hf download` of the same parquet files, through a slow link.

    python scripts/bench_bootstrap_hub.py                      # 0.2 GB, 50 ms / 400 Mbit/s, 3 reps
    python scripts/bench_bootstrap_hub.py --gb 0.2 --reps 3 --rtt-ms 50 --mbit 400 --workdir /tmp/fwe-bench-hub

Builds (once, reused) a test Hub root of `--mb` MB of parquet in `--shards` files (tests/hubsim), serves it on
127.0.0.1 behind RttProxy (`--rtt-ms` round trip, `--mbit` Mbit/s shared by all connections each way), then per
rep, interleaved (the order alternates), each in a fresh process with a fresh HF_HOME (cold cache):
- fwe        `fwe bootstrap --gb G --out DIR` (native Hub reader: parallel downloads + conversion on all cores)
- hf         `hf download HuggingFaceFW/fineweb-edu --repo-type dataset --local-dir DIR FILES...` of the parquet
             files that bootstrap read (its row count mapped onto the shards' row counts)
Wall-clock seconds per run, medians, and ratio = median fwe / median hf (target <= 1.5). Once, first, through
the same link: `fwe bootstrap --hub-reader datasets` (the `datasets` streaming path, timed as `reference.seconds`)
as the reference: every fwe run's parts must have the same sha256 as its parts (`identical`). Writes --out (default artifacts/bench/bootstrap-hub-<UTC>.json)
and prints it; exit 1 if a run failed or an output differed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from tests.hubsim.clientenv import client_env  # noqa: E402
from tests.hubsim.proxy import RttProxy  # noqa: E402
from tests.hubsim.repos import DATASET_REPO, MANIFEST, BuildSpec, build_repos  # noqa: E402
from tests.hubsim.server import HubServer  # noqa: E402

BIN = Path(sys.executable).parent


def ensure_root(root: Path, mb: float, shards: int) -> dict:
    """The hubsim root, built unless one with these parameters is there already; returns its hubsim.json."""
    manifest_path = root / MANIFEST
    if manifest_path.exists():
        manifest = orjson.loads(manifest_path.read_bytes())
        if manifest.get("spec", {}).get("mb") == mb and manifest.get("spec", {}).get("shards") == shards:
            return manifest
    print(f"building {mb} MB in {shards} shards under {root} ...", file=sys.stderr)
    return build_repos(root, BuildSpec(mb=mb, shards=shards))


def part_hashes(out: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("part-*.jsonl"))]


def timed(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exit {proc.returncode}: {proc.stderr[-2000:]}")
    return seconds, proc


def fwe_cmd(args, out: Path, *extra: str) -> list[str]:
    return [str(BIN / "fwe"), "bootstrap", "--gb", str(args.gb), "--out", str(out), "--artifacts-dir",
            str(out.parent / "artifacts"), "--json", *extra]


def files_read(documents: int, shards: list[dict]) -> list[str]:
    """The shards bootstrap read to write `documents` rows (the test Hub has no bad rows)."""
    paths, rows = [], 0
    for shard in shards:
        paths.append(shard["path"])
        rows += shard["rows"]
        if rows >= documents:
            break
    return paths


def run_all(args, report: dict, hub_manifest: dict, proxy: RttProxy, runs: Path) -> None:
    """The reference (`datasets` reader, through the same link, once), then the interleaved reps."""
    env = dict(os.environ, **client_env(proxy.url, runs / "home-ref"))
    reference = runs / "reference"
    seconds, proc = timed(fwe_cmd(args, reference, "--hub-reader", "datasets"), env)
    report["reference"] = {"reader": "datasets", "seconds": round(seconds, 3), "parts_sha256": part_hashes(reference)}
    result = orjson.loads(proc.stdout)
    files = files_read(result["documents"], hub_manifest["shards"])
    report.update(documents=result["documents"], jsonl_bytes=result["bytes"], files=files,
                  parquet_bytes=sum(s["bytes"] for s in hub_manifest["shards"][:len(files)]))
    extra = args.fwe_args.split()
    for rep in range(args.reps):
        for who in ("fwe", "hf") if rep % 2 == 0 else ("hf", "fwe"):
            env = dict(os.environ, **client_env(proxy.url, runs / f"home-{who}-{rep}"))
            out = runs / f"{who}-{rep}"
            if who == "fwe":
                seconds, _ = timed(fwe_cmd(args, out, *extra), env)
                same = part_hashes(out) == report["reference"]["parts_sha256"]
                report["runs"].append({"rep": rep, "who": who, "seconds": round(seconds, 3), "identical": same})
            else:
                seconds, _ = timed([str(BIN / "hf"), "download", DATASET_REPO, "--repo-type", "dataset",
                                    "--local-dir", str(out), *files], env)
                report["runs"].append({"rep": rep, "who": who, "seconds": round(seconds, 3)})
            shutil.rmtree(out, ignore_errors=True)
            print(orjson.dumps(report["runs"][-1]).decode(), file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=0.2, help="fwe bootstrap --gb (JSONL GB to stage).")
    parser.add_argument("--mb", type=float, default=200.0, help="Parquet MB of the test Hub root.")
    parser.add_argument("--shards", type=int, default=8, help="Parquet files of the test Hub root.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rtt-ms", type=float, default=50.0)
    parser.add_argument("--mbit", type=float, default=400.0, help="Link speed, Mbit/s, each way, shared.")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "fwe-bench-hub"))
    parser.add_argument("--fwe-args", default="", help="Extra fwe bootstrap flags, e.g. '--workers 2 --downloads 3'.")
    parser.add_argument("--root", default=None, help="Test Hub root to use or build (default WORKDIR/root-MBmb-SHARDS).")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = Path(args.workdir)
    root = Path(args.root or work / f"root-{args.mb:g}mb-{args.shards}")
    hub_manifest = ensure_root(root, args.mb, args.shards)
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    server = HubServer(root).start()
    proxy = RttProxy(("127.0.0.1", server.port), rtt_s=args.rtt_ms / 1000, bandwidth_bps=args.mbit * 1e6).start()
    report: dict = {"benchmark": "bootstrap-hub", "gb": args.gb, "rtt_ms": args.rtt_ms, "mbit": args.mbit,
                    "hub_root_mb": args.mb, "shards": args.shards, "reps": args.reps, "fwe_args": args.fwe_args,
                    "cpus": os.cpu_count(), "load_avg_before": os.getloadavg(), "runs": []}
    try:
        run_all(args, report, hub_manifest, proxy, runs)
    finally:
        proxy.stop()
        server.stop()
    for who in ("fwe", "hf"):
        report[f"{who}_median_s"] = statistics.median(r["seconds"] for r in report["runs"] if r["who"] == who)
    report["ratio"] = round(report["fwe_median_s"] / report["hf_median_s"], 3)
    report["identical"] = all(r["identical"] for r in report["runs"] if r["who"] == "fwe")
    report["target_ratio"] = 1.5
    report["ok"] = report["identical"] and report["ratio"] <= 1.5
    report["load_avg_after"] = os.getloadavg()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.out or REPO / "artifacts" / "bench" / f"bootstrap-hub-{stamp}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    print(f"wrote {out}", file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

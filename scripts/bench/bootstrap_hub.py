"""Benchmark `fwe bootstrap` from the Hub against `hf download` of the same parquet files, through a slow link.

    python -m scripts.bench.bootstrap_hub                      # 0.2 GB, 50 ms / 400 Mbit/s, 3 reps
    python -m scripts.bench.bootstrap_hub --gb 0.2 --reps 3 --rtt-ms 50 --mbit 400 --workdir /tmp/fwe-bench-hub

Builds (once, reused) a test Hub root of `--mb` MB of parquet in `--shards` files (tests/hubsim), serves it on
127.0.0.1 behind RttProxy (`--rtt-ms` round trip, `--mbit` Mbit/s shared by all connections each way), then per
rep, interleaved (the order alternates), each in a fresh process with a fresh HF_HOME (cold cache):
- fwe        `fwe bootstrap --gb G --out DIR` (native Hub reader: parallel downloads + conversion on all cores)
- hf         `hf download HuggingFaceFW/fineweb-edu --repo-type dataset --local-dir DIR FILES...` of the parquet
             files that bootstrap read (its row count mapped onto the shards' row counts)
Wall-clock seconds per run, medians, and ratio = median fwe / median hf (target <= 1.5). Once, first, through
the same link: `fwe bootstrap --hub-reader datasets` (the `datasets` streaming path, timed as `reference.seconds`)
as the reference: every fwe run's parts must have the same sha256 as its parts (`identical`). Writes
artifacts/bench/bootstrap_hub-<UTC>.json; exit 1 if a run failed, an output differed or the ratio missed its target.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from scripts.bench import harness
from scripts.bench.harness import say
from tests.hubsim.clientenv import client_env
from tests.hubsim.proxy import RttProxy
from tests.hubsim.repos import DATASET_REPO, MANIFEST, BuildSpec, build_repos
from tests.hubsim.server import HubServer

NAME = "bootstrap_hub"
BIN = Path(sys.executable).parent
TARGET_RATIO = 1.5


def ensure_root(root: Path, mb: float, shards: int) -> dict:
    """The hubsim root, built unless one with these parameters is there already; returns its hubsim.json."""
    manifest_path = root / MANIFEST
    if manifest_path.exists():
        manifest = orjson.loads(manifest_path.read_bytes())
        if manifest.get("spec", {}).get("mb") == mb and manifest.get("spec", {}).get("shards") == shards:
            return manifest
    say(f"building {mb} MB in {shards} shards under {root} ...")
    return build_repos(root, BuildSpec(mb=mb, shards=shards))


def part_hashes(out: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("part-*.jsonl"))]


def timed(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    """(seconds from spawn to exit, the process) of a run that must succeed."""
    seconds, proc = harness.run_timed(cmd, env=env, timeout=3600)
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
    """The reference (`datasets` reader, through the same link, once), then the interleaved reps (the order
    alternates: fwe first in even reps, hf first in odd ones)."""
    env = harness.child_env(**client_env(proxy.url, runs / "home-ref"))
    reference = runs / "reference"
    seconds, proc = timed(fwe_cmd(args, reference, "--hub-reader", "datasets"), env)
    report["reference"] = {"reader": "datasets", "seconds": round(seconds, 3), "parts_sha256": part_hashes(reference)}
    result = orjson.loads(proc.stdout)
    files = files_read(result["documents"], hub_manifest["shards"])
    report.update(documents=result["documents"], jsonl_bytes=result["bytes"], files=files,
                  parquet_bytes=sum(s["bytes"] for s in hub_manifest["shards"][:len(files)]))
    extra = args.fwe_args.split()

    def one(who: str, rep: int) -> float:
        env = harness.child_env(**client_env(proxy.url, runs / f"home-{who}-{rep}"))
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
        say(orjson.dumps(report["runs"][-1]).decode())
        return seconds

    harness.interleaved(args.reps, {"fwe": lambda rep: one("fwe", rep), "hf": lambda rep: one("hf", rep)})


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--gb", type=float, default=0.2, help="fwe bootstrap --gb (JSONL GB to stage).")
    parser.add_argument("--mb", type=float, default=200.0, help="Parquet MB of the test Hub root.")
    parser.add_argument("--shards", type=int, default=8, help="Parquet files of the test Hub root.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rtt-ms", type=float, default=50.0)
    parser.add_argument("--mbit", type=float, default=400.0, help="Link speed, Mbit/s, each way, shared.")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "fwe-bench-hub"))
    parser.add_argument("--fwe-args", default="", help="Extra fwe bootstrap flags, e.g. '--workers 2 --downloads 3'.")
    parser.add_argument("--root", default=None,
                        help="Test Hub root to use or build (default WORKDIR/root-MBmb-SHARDS).")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    work = Path(args.workdir)
    root = Path(args.root or work / f"root-{args.mb:g}mb-{args.shards}")
    hub_manifest = ensure_root(root, args.mb, args.shards)
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    report: dict = {"benchmark": "bootstrap-hub", "gb": args.gb, "rtt_ms": args.rtt_ms, "mbit": args.mbit,
                    "hub_root_mb": args.mb, "shards": args.shards, "reps": args.reps, "fwe_args": args.fwe_args,
                    "cpus": os.cpu_count(), "load_avg_before": os.getloadavg(), "runs": []}
    with HubServer(root) as server, \
            RttProxy(("127.0.0.1", server.port), rtt_s=args.rtt_ms / 1000, bandwidth_bps=args.mbit * 1e6) as proxy:
        run_all(args, report, hub_manifest, proxy, runs)
    for who in ("fwe", "hf"):
        report[f"{who}_median_s"] = harness.median(r["seconds"] for r in report["runs"] if r["who"] == who)
    report["ratio"] = harness.ratio(report["fwe_median_s"], report["hf_median_s"])
    report["identical"] = all(r["identical"] for r in report["runs"] if r["who"] == "fwe")
    report["target_ratio"] = TARGET_RATIO
    report["ok"] = report["identical"] and report["ratio"] <= TARGET_RATIO
    report["load_avg_after"] = os.getloadavg()
    harness.write_result(NAME, args, report, str(work))
    say(f"fwe {report['fwe_median_s']:.2f} s, hf download {report['hf_median_s']:.2f} s (medians): "
        f"{report['ratio']}x (target <= {TARGET_RATIO}), identical: {report['identical']}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

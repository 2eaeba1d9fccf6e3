"""Benchmark `fwe bootstrap` from the Hub against `hf download` of the same parquet files and against the floor,
through two models of a slow link; and fwe's CPU time per GB of JSONL against a plain conversion loop.

    python -m scripts.bench.bootstrap_hub                      # 0.2 GB, 50 ms, 400 Mbit/s, both links, 3 reps
    python -m scripts.bench.bootstrap_hub --gb 0.2 --reps 3 --rtt-ms 50 --mbit 400 --links per-connection,shared

Builds (once, reused) a test Hub root of `--mb` MB of parquet in `--shards` files (tests/hubsim), serves it on
127.0.0.1 behind RttProxy (`--rtt-ms` round trip, 2 handshake RTTs per connection) with each link model:
- per-connection: every connection capped at `--mbit` Mbit/s each way, connections add up (how CDNs serve);
- shared: one `--mbit` Mbit/s link each way that every connection shares.
Per link model and rep, interleaved (the order alternates), each a fresh process with a fresh HF_HOME:
- fwe   `fwe bootstrap --gb G --out DIR` (native Hub reader)
- hf    `hf download HuggingFaceFW/fineweb-edu --repo-type dataset --local-dir DIR FILES...` of the parquet files
        bootstrap reads (its row count mapped onto the shards' row counts)
- floor the least time those files' bytes take through the link: 3 RTTs (handshakes and the request) plus their
        bytes over the link's rate (shared: `--mbit`; per-connection: `--mbit` times hf's 8 connections)
Wall seconds (medians), ratios fwe/hf (targets: per-connection <= 1.3, shared <= 1.15) and fwe/floor.

CPU: every fwe run's CPU seconds (user + system of the process and its children), per GB of JSONL written (target
<= 6), whole process and marginal (less a `--gb 0.001` run's, without the link: start-up, listing, one footer);
and the floor's, `scripts/peers/plain_convert.py` (pyarrow row groups, orjson, sha256 in and out, one thread) on
the files hf downloaded. Once, first, without the link: `fwe bootstrap --hub-reader datasets` as the reference:
every fwe run's parts must have the same sha256 (`identical`). Writes artifacts/bench/bootstrap_hub-<UTC>.json;
exit 1 if a run failed, an output differed or a target was missed.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from scripts.bench import harness
from scripts.bench.harness import REPO_ROOT, say
from tests.hubsim.clientenv import client_env
from tests.hubsim.proxy import RttProxy
from tests.hubsim.repos import DATASET_REPO, MANIFEST, BuildSpec, build_repos
from tests.hubsim.server import HubServer

NAME = "bootstrap_hub"
BIN = Path(sys.executable).parent
TARGETS = {"per-connection": 1.3, "shared": 1.15}
CPU_TARGET = 6.0  # CPU seconds per GB of JSONL
HF_CONNECTIONS = 8  # hf download's default --max-workers
TINY_GB = 0.001


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


def timed(cmd: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(seconds from spawn to exit, CPU seconds of the process and its children, the process) of a run that must
    succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, proc = harness.run_timed(cmd, env=env, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exit {proc.returncode}: {proc.stderr[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, proc


def fwe_cmd(gb: float, out: Path, *extra: str) -> list[str]:
    return [str(BIN / "fwe"), "bootstrap", "--gb", str(gb), "--out", str(out), "--artifacts-dir",
            str(out.parent / f"{out.name}-artifacts"), "--json", *extra]


def files_read(documents: int, shards: list[dict]) -> list[str]:
    """The shards bootstrap read to write `documents` rows (the test Hub has no bad rows)."""
    paths, rows = [], 0
    for shard in shards:
        paths.append(shard["path"])
        rows += shard["rows"]
        if rows >= documents:
            break
    return paths


def floor_s(parquet_bytes: int, link: str, mbit: float, rtt_s: float) -> float:
    rate = mbit * 1e6 / 8 * (HF_CONNECTIONS if link == "per-connection" else 1)
    return 3 * rtt_s + parquet_bytes / rate


def reference(args, report: dict, hub_manifest: dict, server: HubServer, runs: Path) -> None:
    """The `datasets` reader's bootstrap (straight to the server), and fwe's fixed cost (a tiny --gb)."""
    env = harness.child_env(**client_env(server.url, runs / "home-ref"))
    out = runs / "reference"
    seconds, _, proc = timed(fwe_cmd(args.gb, out, "--hub-reader", "datasets"), env)
    report["reference"] = {"reader": "datasets", "seconds": round(seconds, 3), "parts_sha256": part_hashes(out)}
    result = orjson.loads(proc.stdout)
    files = files_read(result["documents"], hub_manifest["shards"])
    report.update(documents=result["documents"], jsonl_bytes=result["bytes"], files=files,
                  parquet_bytes=sum(s["bytes"] for s in hub_manifest["shards"][:len(files)]))
    tiny = []
    for rep in range(args.reps):
        env = harness.child_env(**client_env(server.url, runs / f"home-tiny-{rep}"))
        tiny.append(timed(fwe_cmd(TINY_GB, runs / f"tiny-{rep}", *args.fwe_args.split()), env)[1])
    report["fixed_cpu_s"] = {"gb": TINY_GB, "median": harness.median(tiny, 3), "all": [round(c, 3) for c in tiny]}


def run_link(args, link: str, report: dict, proxy: RttProxy, runs: Path) -> list[dict]:
    """The interleaved reps of fwe and hf through one link model."""
    records: list[dict] = []

    def one(who: str, rep: int) -> float:
        env = harness.child_env(**client_env(proxy.url, runs / f"home-{link}-{who}-{rep}"))
        out = runs / f"{link}-{who}-{rep}"
        if who == "fwe":
            seconds, cpu, _ = timed(fwe_cmd(args.gb, out, *args.fwe_args.split()), env)
            record = {"link": link, "rep": rep, "who": who, "seconds": round(seconds, 3), "cpu_s": round(cpu, 3),
                      "identical": part_hashes(out) == report["reference"]["parts_sha256"]}
        else:
            seconds, cpu, _ = timed([str(BIN / "hf"), "download", DATASET_REPO, "--repo-type", "dataset",
                                     "--local-dir", str(out), *report["files"]], env)
            record = {"link": link, "rep": rep, "who": who, "seconds": round(seconds, 3), "cpu_s": round(cpu, 3)}
            if "plain_convert" not in report:  # the CPU floor, on what hf downloaded (no network)
                report["plain_convert"] = plain_convert(out, args.gb)
        records.append(record)
        shutil.rmtree(out, ignore_errors=True)
        say(orjson.dumps(record).decode())
        return seconds

    harness.interleaved(args.reps, {"fwe": lambda rep: one("fwe", rep), "hf": lambda rep: one("hf", rep)})
    return records


def plain_convert(folder: Path, gb: float) -> dict:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "peers" / "plain_convert.py"), str(folder),
                           str(gb), str(folder.parent / "plain.jsonl")], capture_output=True, text=True, check=True)
    (folder.parent / "plain.jsonl").unlink()
    result = orjson.loads(proc.stdout)
    return dict(result, cpu_s_per_gb=round(result["cpu_s"] / (result["bytes"] / 1e9), 3))


def summarise(args, report: dict) -> None:
    runs = report["runs"]
    gb = report["jsonl_bytes"] / 1e9
    report["links"] = {}
    for link in args.links:
        fwe = harness.median(r["seconds"] for r in runs if r["link"] == link and r["who"] == "fwe")
        hf = harness.median(r["seconds"] for r in runs if r["link"] == link and r["who"] == "hf")
        floor = floor_s(report["parquet_bytes"], link, args.mbit, args.rtt_ms / 1000)
        ratio = harness.ratio(fwe, hf)
        report["links"][link] = {"fwe_median_s": fwe, "hf_median_s": hf, "floor_s": round(floor, 3),
                                 "ratio_to_hf": ratio, "target": TARGETS[link],
                                 "ratio_to_floor": harness.ratio(fwe, floor), "hf_to_floor": harness.ratio(hf, floor),
                                 "pass": ratio is not None and ratio <= TARGETS[link]}
    cpu = harness.median(r["cpu_s"] for r in runs if r["who"] == "fwe")
    fixed = report["fixed_cpu_s"]["median"]
    report["cpu"] = {"fwe_cpu_s_median": cpu, "cpu_s_per_gb": round(cpu / gb, 3),
                     "marginal_cpu_s_per_gb": round((cpu - fixed) / (gb - TINY_GB), 3),
                     "floor_cpu_s_per_gb": report.get("plain_convert", {}).get("cpu_s_per_gb"),
                     "target": CPU_TARGET, "pass": cpu / gb <= CPU_TARGET}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--gb", type=float, default=0.2, help="fwe bootstrap --gb (JSONL GB to stage).")
    parser.add_argument("--mb", type=float, default=200.0, help="Parquet MB of the test Hub root.")
    parser.add_argument("--shards", type=int, default=8, help="Parquet files of the test Hub root.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rtt-ms", type=float, default=50.0)
    parser.add_argument("--mbit", type=float, default=400.0, help="Link speed, Mbit/s, each way (per connection or "
                                                                  "shared, as --links says).")
    parser.add_argument("--links", default="per-connection,shared", help="Link models, comma-separated.")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "fwe-bench-hub"))
    parser.add_argument("--fwe-args", default="", help="Extra fwe bootstrap flags, e.g. '--workers 2 --downloads 3'.")
    parser.add_argument("--root", default=None,
                        help="Test Hub root to use or build (default WORKDIR/root-MBmb-SHARDS).")
    return parser


def main(argv: list[str] | None = None) -> int:
    bench_parser = parser()
    args = harness.parse(bench_parser, argv)
    args.links = [link.strip() for link in args.links.split(",") if link.strip()]
    if not args.links or set(args.links) - set(TARGETS):
        bench_parser.error(f"--links takes {', '.join(TARGETS)}")
    work = Path(args.workdir)
    root = Path(args.root or work / f"root-{args.mb:g}mb-{args.shards}")
    hub_manifest = ensure_root(root, args.mb, args.shards)
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    report: dict = {"benchmark": "bootstrap-hub", "gb": args.gb, "rtt_ms": args.rtt_ms, "mbit": args.mbit,
                    "hub_root_mb": args.mb, "shards": args.shards, "reps": args.reps, "fwe_args": args.fwe_args,
                    "cpus": os.cpu_count(), "load_avg_before": os.getloadavg(), "runs": []}
    with HubServer(root) as server:
        reference(args, report, hub_manifest, server, runs)
        for link in args.links:
            shaping = {"per_connection_bps": args.mbit * 1e6} if link == "per-connection" else \
                {"bandwidth_bps": args.mbit * 1e6}
            with RttProxy(("127.0.0.1", server.port), rtt_s=args.rtt_ms / 1000, **shaping) as proxy:
                report["runs"] += run_link(args, link, report, proxy, runs)
    summarise(args, report)
    report["identical"] = all(r["identical"] for r in report["runs"] if r["who"] == "fwe")
    report["ok"] = report["identical"] and report["cpu"]["pass"] and all(v["pass"] for v in report["links"].values())
    report["load_avg_after"] = os.getloadavg()
    harness.write_result(NAME, args, report, str(work))
    for link, verdict in report["links"].items():
        say(f"{link}: fwe {verdict['fwe_median_s']:.2f} s, hf download {verdict['hf_median_s']:.2f} s, floor "
            f"{verdict['floor_s']:.2f} s (medians): {verdict['ratio_to_hf']}x hf (target <= {verdict['target']}), "
            f"{verdict['ratio_to_floor']}x floor")
    cpu = report["cpu"]
    say(f"CPU: {cpu['cpu_s_per_gb']} s/GB whole process, {cpu['marginal_cpu_s_per_gb']} s/GB past start-up "
        f"(target <= {CPU_TARGET}); plain loop {cpu['floor_cpu_s_per_gb']} s/GB; identical: {report['identical']}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

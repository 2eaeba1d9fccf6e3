"""Benchmark (issue #46): how many requests fwe sends the Hub's resolver (`/resolve/`, which the Hub limits per 5
minutes: 5,000 for a free account, 3,000 anonymous), against the test Hub redirecting its parquet resolves to a CDN's
signed URLs as the real Hub does (tests/hubsim/cdn.py; resolver requests counted from the Hub's request log, CDN
reads from the CDN's):

- epoch: one rank reads an epoch of the lab repo (8 parquet files, 73 row groups: `fwe smoke --epochs 1` to the
  end, byte tokens), URLs valid an hour; claim: resolves <= files + 1;
- expiring: the same with URLs valid --expiring-ttl-s (2 s) and the CDN answering each read --expiring-delay-ms late,
  so the files' reads outlive their URLs; claim: the same tokens;
- direct: the same against the Hub serving its files itself (each read a resolve: what every read cost before);
- job: --nodes x --ranks-per-node ranks of `fwe smoke` (2 batches each) started at once, cold, each node its own
  HF_HOME and Hub server (tests/hubsim/ranks.py); claim: each node resolves each file at most once;
- model: `fwe doctor --ranks`'s figures (fwe_cli/measure/resolve_plan.py) for 1,024 x 8 on sample-10BT at 128 M
  tokens/s, and for the job's shape on the lab repo beside what the job sent.

- against (with --against DIR, another checkout of fwe, e.g. `git worktree add /tmp/main main`): this fwe and that
  one as peers, --reps interleaved reps through --rtt-ms (50 ms by default then) to the Hub and to the CDN, with the
  Hub serving its files itself and redirecting them: a cold and a warm `fwe smoke` of one 8 x 1024 GPT-2 batch
  (first batch, whole process) and an epoch to its end (tokens/s); medians and ratios this/that.

    python -m scripts.bench.hub_resolves [--rtt-ms 0] [--nodes 4] [--ranks-per-node 8] [--out artifacts/bench]
    python -m scripts.bench.hub_resolves --against /tmp/main [--reps 5]

Writes artifacts/bench/hub_resolves-<UTC>.json.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import orjson

from scripts.bench import harness
from scripts.bench.harness import REPO_ROOT, say
from tests.hubsim.bench import redirecting_cdn, sealed_run
from tests.hubsim.faults import Faults
from tests.hubsim.proxy import RttProxy
from tests.hubsim.ranks import Job
from tests.hubsim.repos import BuildSpec, build_repos
from tests.hubsim.server import HubServer

NAME = "hub_resolves"
LAB = BuildSpec(mb=1.3, shards=8, row_group_rows=7)  # 8 files, 73 row groups
EPOCH = ("--tokenizer", "byte", "--epochs", "1", "--batches", "1000000")
FIRST = ("--tokenizer", "gpt2", "--batches", "1")
AGAINST = ("cold_first_batch_s", "cold_wall_s", "warm_first_batch_s", "warm_wall_s", "epoch_tokens_per_s")


def against(root: Path, workdir: Path, other: Path, reps: int, rtt_s: float) -> dict:
    """This fwe and the one in `other`, interleaved (their order alternating), each mode's medians and ratios."""
    trees = {"this": REPO_ROOT, "other": other}
    runs = []
    for mode, ttl_s in (("direct", None), ("cdn", 3600.0)):
        with HubServer(root) as hub, RttProxy(("127.0.0.1", hub.port), rtt_s) as proxy, \
                redirecting_cdn(root, hub, ttl_s, rtt_s):
            for rep in range(reps):
                for name in harness.rotation(list(trees), rep):
                    home = workdir / "against" / f"{mode}-{rep}-{name}"
                    cold, cold_wall = smoke(trees[name], proxy.url, home, workdir, *FIRST)
                    warm, warm_wall = smoke(trees[name], proxy.url, home, workdir, *FIRST)
                    whole, _ = smoke(trees[name], proxy.url, home.with_name(home.name + "-epoch"), workdir, *EPOCH)
                    ok = all(r.get("ok") for r in (cold, warm, whole))
                    runs.append({"mode": mode, "rep": rep, "fwe": name, "ok": ok,
                                 "cold_first_batch_s": cold.get("first_batch_s"), "cold_wall_s": round(cold_wall, 4),
                                 "warm_first_batch_s": warm.get("first_batch_s"), "warm_wall_s": round(warm_wall, 4),
                                 "epoch_tokens_per_s": whole.get("tokens_per_s")})
                    say(f"against {mode} rep {rep} {name}: " + ", ".join(f"{k} {runs[-1][k]}" for k in AGAINST))
    summary = {}
    for mode in ("direct", "cdn"):
        for key in AGAINST:
            this, that = (harness.median((r[key] for r in runs if (r["mode"], r["fwe"]) == (mode, name)), 4)
                          for name in trees)
            summary[f"{mode}.{key}"] = {"this": this, "other": that, "this/other": harness.ratio(this, that)}
    return {"other": str(other), "reps": reps, "rtt_ms": rtt_s * 1000, "summary": summary, "runs": runs}


def smoke(tree: Path, endpoint: str, home: Path, workdir: Path, *args: str) -> tuple[dict, float]:
    """One sealed `fwe smoke --source hub` of the fwe in `tree` (its result, process wall seconds)."""
    proc, wall = sealed_run([sys.executable, "-m", "fwe_cli", "smoke", "--source", "hub", "--json", "--batch", "8",
                             "--seq-len", "1024", "--timeout", "600", "--artifacts-dir", str(workdir / "artifacts"),
                             *args], endpoint, home, workdir, 900, cwd=tree)
    return (orjson.loads(proc.stdout) if proc.stdout.strip() else {}), wall


def epoch(root: Path, workdir: Path, name: str, rtt_s: float, ttl_s: float | None, cdn_delay_s: float = 0.0) -> dict:
    """One `fwe smoke` reading the lab repo's epoch to its end (fresh HF_HOME), the Hub redirecting to the CDN with
    URLs valid `ttl_s` (None: serving its files itself); what both servers saw and what fwe counted."""
    out = workdir / name
    with HubServer(root) as hub, RttProxy(("127.0.0.1", hub.port), rtt_s) as proxy, \
            redirecting_cdn(root, hub, ttl_s, rtt_s) as cdn:
        if cdn is not None:
            cdn.set_faults(Faults(delay_s=cdn_delay_s))
        hub.new_log()
        result, wall = smoke(REPO_ROOT, proxy.url, out / "home", workdir, *EPOCH, "--save-batches",
                             str(out / "batches.npz"))
        hub_log, cdn_log = hub.flush(), cdn.flush() if cdn is not None else []
    with np.load(out / "batches.npz") as saved:
        digest = hashlib.sha256(saved["batches"].tobytes()).hexdigest()[:16]
    record = {"run": name, "ok": bool(result.get("ok")), "ttl_s": ttl_s, "wall_s": round(wall, 3),
              "resolves": sum(1 for r in hub_log if r["kind"] == "resolve"),
              "resolves_refused": sum(1 for r in hub_log if r["kind"] == "resolve" and r["status"] == 429),
              "cdn_reads": len(cdn_log), "cdn_refused": sum(1 for r in cdn_log if r["status"] == 403),
              "batches": result.get("batches"), "batches_sha256": digest, "first_batch_s": result.get("first_batch_s"),
              "tokens_per_s": result.get("tokens_per_s"), "hub_requests": result.get("hub_requests"),
              "error": result.get("error")}
    say(f"{name}: resolves {record['resolves']}, CDN reads {record['cdn_reads']} ({record['cdn_refused']} refused), "
        f"{record['batches']} batches {digest}, {record['tokens_per_s']} tokens/s, wall {wall:.1f} s")
    return record


def job(root: Path, workdir: Path, nodes: int, ranks_per_node: int) -> dict:
    with Job(root, workdir / "job", nodes, ranks_per_node, cdn_ttl_s=3600) as ranks:
        cold = ranks.run("cold")
    failed = [rank.rank for rank in cold.ranks if rank.returncode != 0 or not (rank.result or {}).get("ok")]
    record = {"run": "job", "nodes": nodes, "ranks_per_node": ranks_per_node, "ranks_failed": failed,
              "resolves_per_node": cold.resolves_per_node(), "resolves_total": sum(cold.resolves_per_node()),
              "cdn_reads": len(cold.cdn)}
    say(f"job {nodes} x {ranks_per_node} cold: resolves per node {record['resolves_per_node']} (total "
        f"{record['resolves_total']}), CDN reads {record['cdn_reads']}, failed ranks {failed or 'none'}")
    return record


def model(sizes: list[int], row_groups: int, nodes: int, ranks_per_node: int) -> dict | None:
    """The planner's figures (None when the fwe measured has no planner)."""
    try:
        from fwe_cli.measure.resolve_plan import files_per_node, resolve_plan, sample_10bt
    except ImportError:
        return None
    big = resolve_plan(*sample_10bt(), ranks=1024, workers=8, tokens_per_s=128e6)
    say(f"model, 1,024 x 8 on sample-10BT at 128 M tokens/s: {big['after']} (one per read: {big['before']})")
    return {"sample_10bt_1024x8": big, "lab_files_per_node": files_per_node(sizes, nodes),
            "lab_job": resolve_plan(sizes, row_groups, 1e6, ranks=nodes * ranks_per_node, workers=0,
                                    tokens_per_s=1e6, ranks_per_node=ranks_per_node)}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="Added RTT to the Hub and the CDN (default 0).")
    parser.add_argument("--nodes", type=int, default=4, help="The job's nodes (default 4).")
    parser.add_argument("--ranks-per-node", type=int, default=8, help="The job's ranks per node (default 8).")
    parser.add_argument("--expiring-ttl-s", type=float, default=2.0, help="URL lifetime of the expiring run (2).")
    parser.add_argument("--expiring-delay-ms", type=float, default=300.0,
                        help="The CDN's delay per read in the expiring run (default 300).")
    parser.add_argument("--against", default=None, help="Another checkout of fwe to run as a peer (then only that).")
    parser.add_argument("--reps", type=int, default=5, help="Interleaved reps with --against (default 5).")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    with tempfile.TemporaryDirectory(prefix="bench-hub-resolves-") as tmp:
        workdir = Path(tmp)
        manifest = build_repos(workdir / "hub", LAB)
        if args.against:
            peers = against(workdir / "hub", workdir, Path(args.against), args.reps, (args.rtt_ms or 50.0) / 1000)
            harness.write_result(NAME, args, {"kind": "bench_hub_resolves_against", "cwd": str(REPO_ROOT), **peers})
            say(orjson.dumps(peers["summary"], option=orjson.OPT_INDENT_2).decode())
            return 0 if all(r["ok"] for r in peers["runs"]) else 1
        import pyarrow.parquet as pq

        paths = [workdir / "hub" / "datasets" / manifest["dataset"] / shard["path"] for shard in manifest["shards"]]
        row_groups = sum(pq.ParquetFile(path).num_row_groups for path in paths)
        say(f"lab repo: {len(paths)} files, {row_groups} row groups, {manifest['parquet_bytes'] / 1e6:.1f} MB")
        rtt_s = args.rtt_ms / 1000
        runs = [epoch(workdir / "hub", workdir, "direct", rtt_s, None),
                epoch(workdir / "hub", workdir, "epoch", rtt_s, 3600.0),
                epoch(workdir / "hub", workdir, "expiring", rtt_s, args.expiring_ttl_s, args.expiring_delay_ms / 1000)]
        ranks = job(workdir / "hub", workdir, args.nodes, args.ranks_per_node)
        figures = model([s["bytes"] for s in manifest["shards"]], row_groups, args.nodes, args.ranks_per_node)
    direct, one, expiring = runs
    claims = {"epoch_resolves_at_most_files_plus_1": one["resolves"] <= len(paths) + 1,
              "expiring_same_tokens": expiring["batches_sha256"] == direct["batches_sha256"] == one["batches_sha256"],
              "job_at_most_one_resolve_per_file_and_node": all(n <= len(paths) for n in ranks["resolves_per_node"]),
              "every_run_ok": all(r["ok"] for r in runs) and not ranks["ranks_failed"]}
    harness.write_result(NAME, args, {
        "kind": "bench_hub_resolves", "claims": claims, "pass": all(claims.values()), "cwd": str(REPO_ROOT),
        "lab": {"files": len(paths), "row_groups": row_groups, "bytes": manifest["parquet_bytes"]},
        "runs": runs, "job": ranks, "model": figures,
        "ratios": {"epoch_resolves_vs_direct": harness.ratio(one["resolves"], direct["resolves"]),
                   "epoch_tokens_per_s_vs_direct": harness.ratio(one["tokens_per_s"], direct["tokens_per_s"])}})
    say(f"claims: {claims}")
    return 0 if all(claims.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

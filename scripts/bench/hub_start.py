"""Benchmark (issues #12, #26): whole-process time of `fwe smoke --source hub` against a 10-line datasets + tokenizers
script and against the floor (the interpreter plus one round trip).

    python -m scripts.bench.hub_start [--reps 3] [--rtt-ms 50] [--root /tmp/hub-start] [--mb 280 --shards 14]
                                      [--hub-reader native,datasets] [--fwe-arg=--doc-batch=64 ...]
                                      [--warmup 1] [--out artifacts/bench] [--check]

Both data peers fetch the same first 8x1024 batch of GPT-2 ids (ids(doc) + [eos], rows in dataset order) from the
test Hub (tests/hubsim: FineWeb-Edu's real layout, README `configs:` + `sample/10BT/*.parquet`, and the gpt2
tokenizer.json) through an RTT proxy (default 50 ms, plus 2 handshake RTTs per new connection):

- script: `python scripts/peers/hf_stream_first_batch.py OUT.npy` (load_dataset(..., streaming=True) +
  Tokenizer.from_pretrained("openai-community/gpt2"), encode rows until 8x1024 tokens)
- fwe:    `python -m fwe_cli smoke --source hub --tokenizer gpt2 --batch 8 --seq-len 1024 --batches 1 --json
           --save-batches OUT.npz --artifacts-dir DIR [--hub-reader R] [--fwe-arg ...]`
- floor:  `python scripts/peers/hub_round_trip.py`: the interpreter and one HEAD of the dataset card on a new
          connection, what a warm start cannot do without (it says whether the branch moved)

Each run is a fresh, sealed client process (tests/hubsim/clientenv.py: HF_ENDPOINT = the proxy, its own HF_HOME,
only 127.0.0.1 reachable). Per rep and peer: a fresh HF_HOME (cold run, which also means no fwe listing/head cache,
kept under HF_HOME/hub/fwe), then the same HF_HOME again (warm run). Runs are interleaved: each rep runs every peer
cold, then every peer warm, and the peers' order rotates from rep to rep. --warmup runs of each peer come first and
are reported apart (`warmup_runs`), so no rep pays for paging in the interpreter and packages. Figures: wall seconds
from spawn to exit (median of the reps), fwe's own first_batch_s and request counts, the server's request log per
run, and the acceptance: fwe/script cold <= 0.2 and warm <= 0.12, fwe warm/floor <= 1.5, at most one request before
a warm first batch. The saved batches must be token-identical across all runs.

Without --root the repos are built in a temporary folder; with --root they are built there unless it already holds
a build (hubsim.json), which is then reused as is. Writes artifacts/bench/hub_start-<UTC>.json (progress on
stderr). Exit 0: every run ok, batches identical, nothing left the seal (the verdict is in the JSON; with --check
exit 3 when it fails); exit 1: a run failed, batches differ, or the seal was hit; exit 2: bad usage.
Compare figures from the same machine only. --cdn-ttl-s T: the Hub redirects parquet resolves to a CDN's signed URLs
(tests/hubsim/bench.py redirecting_cdn); `server_resolves` and `cdn_requests` count the two.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import orjson

from fwe_cli.artifacts import utc_iso
from scripts.bench import harness
from scripts.bench.harness import REPO_ROOT, median, say
from tests.hubsim.bench import redirecting_cdn, request_summary, sealed_run
from tests.hubsim.clientenv import client_env
from tests.hubsim.proxy import RttProxy
from tests.hubsim.repos import MANIFEST, BuildSpec, build_repos
from tests.hubsim.server import HubServer

NAME = "hub_start"
PEER_SCRIPT = REPO_ROOT / "scripts" / "peers" / "hf_stream_first_batch.py"
FLOOR_SCRIPT = REPO_ROOT / "scripts" / "peers" / "hub_round_trip.py"
SCRIPT = "script"
FLOOR = "floor"
LIMITS = {"cold": 0.2, "warm": 0.12}
FLOOR_LIMIT = 1.5  # fwe warm / the floor
WARM_REQUESTS = 1  # requests before a warm first batch
BATCH, SEQ_LEN = 8, 1024
RUN_TIMEOUT_S = 600.0


def fwe_smoke_has(flag: str) -> bool:
    """Whether `fwe smoke --help` lists `flag` (its help is rendered by rich, so read it wide)."""
    env = dict(os.environ, COLUMNS="400", TERM="dumb", NO_COLOR="1")
    proc = subprocess.run([sys.executable, "-m", "fwe_cli", "smoke", "--help"], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=120)
    return flag in proc.stdout


def peers(hub_readers: list[str], fwe_args: list[str]) -> dict[str, list[str]]:
    """name -> extra fwe smoke arguments, for each fwe variant (the script has none)."""
    if not hub_readers:
        return {"fwe": list(fwe_args)}
    return {f"fwe[{reader}]": ["--hub-reader", reader, *fwe_args] for reader in hub_readers}


def command(peer: str, extra: list[str], batch_path: Path, artifacts: Path) -> list[str]:
    if peer == SCRIPT:
        return [sys.executable, str(PEER_SCRIPT), str(batch_path)]
    if peer == FLOOR:
        return [sys.executable, str(FLOOR_SCRIPT)]
    return [sys.executable, "-m", "fwe_cli", "smoke", "--source", "hub", "--tokenizer", "gpt2", "--batch", str(BATCH),
            "--seq-len", str(SEQ_LEN), "--batches", "1", "--json", "--save-batches", str(batch_path),
            "--artifacts-dir", str(artifacts), *extra]


def load_batch(path: Path) -> np.ndarray | None:
    """The first batch a run saved ([8, 1024] int32), or None when it saved none."""
    if path.suffix == ".npz" and path.exists():
        with np.load(path) as saved:
            return saved["batches"][0]
    return np.load(path) if path.exists() else None


def run_once(peer: str, extra: list[str], rep: int, cache: str, order: int, endpoint: str, home: Path,
             workdir: Path, hub: HubServer, cdn: HubServer | None = None) -> tuple[dict, np.ndarray | None]:
    suffix = ".npy" if peer == SCRIPT else ".npz"
    batch_path = workdir / "batches" / f"{peer}_rep{rep}_{cache}{suffix}"
    args = command(peer, extra, batch_path, workdir / "fwe_artifacts")
    hub.new_log()
    if cdn is not None:
        cdn.new_log()
    load_1m = os.getloadavg()[0]
    try:
        proc, wall = sealed_run(args, endpoint, home, workdir, RUN_TIMEOUT_S)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        wall, rc, stdout, stderr = RUN_TIMEOUT_S, None, "", f"timed out after {exc.timeout:g} s"
    served = request_summary(hub.flush())
    batch = load_batch(batch_path)
    record = {"peer": peer, "rep": rep, "cache": cache, "order": order, "rc": rc, "wall_s": round(wall, 4),
              "load_1m_at_start": round(load_1m, 2), "batch_shape": list(batch.shape) if batch is not None else None,
              "server_requests": served["requests"], "server_connections": served["connections"],
              "server_resolves": served["resolves"],
              "cdn_requests": len(cdn.flush()) if cdn is not None else None,
              "server_body_bytes": served["body_bytes"], "server_span_s": served["server_span_s"],
              "server_requests_detail": served["requests_detail"]}
    if peer not in (SCRIPT, FLOOR):
        try:
            result = orjson.loads(stdout)
        except orjson.JSONDecodeError:
            result = None
        record.update({"fwe_ok": bool(result and result.get("ok")),
                       "first_batch_s": result.get("first_batch_s") if result else None,
                       "fwe_requests": result.get("requests") if result else None,
                       "fwe_requests_first_batch": result.get("requests_first_batch") if result else None,
                       "fwe_error": result.get("error") if result else "no JSON from fwe smoke"})
    shaped = batch is not None and tuple(batch.shape) == (BATCH, SEQ_LEN)
    record["ok"] = rc == 0 and (shaped or peer == FLOOR) and record.get("fwe_ok", True)
    if not record["ok"]:
        record["stderr_tail"] = stderr[-3000:]
    return record, batch


def summarise(runs: list[dict], names: list[str]) -> dict:
    out: dict = {}
    for name in names:
        out[name] = {}
        for cache in ("cold", "warm"):
            mine = [r for r in runs if r["peer"] == name and r["cache"] == cache]
            entry = {"wall_s_median": median((r["wall_s"] for r in mine), 4), "wall_s": [r["wall_s"] for r in mine],
                     "server_requests_median": median((r["server_requests"] for r in mine), 4),
                     "server_connections_median": median((r["server_connections"] for r in mine), 4)}
            if name not in (SCRIPT, FLOOR):
                entry.update({"first_batch_s_median": median((r["first_batch_s"] for r in mine), 4),
                              "fwe_requests_first_batch_max": max(
                                  (r["fwe_requests_first_batch"] for r in mine
                                   if r["fwe_requests_first_batch"] is not None), default=None),
                              "first_batch_s": [r["first_batch_s"] for r in mine],
                              "fwe_requests_median": median((r["fwe_requests"] for r in mine), 4),
                              "outside_first_batch_s_median": median((r["wall_s"] - r["first_batch_s"] for r in mine
                                                                      if r["first_batch_s"] is not None), 4)})
            out[name][cache] = entry
    return out


def acceptance(summary: dict, fwe_names: list[str]) -> dict:
    verdicts = {}
    for name in fwe_names:
        verdict: dict = {}
        for cache, limit in LIMITS.items():
            fwe_s, script_s = summary[name][cache]["wall_s_median"], summary[SCRIPT][cache]["wall_s_median"]
            ratio = harness.ratio(fwe_s, script_s, digits=4)
            verdict[cache] = {"fwe_wall_s": fwe_s, "script_wall_s": script_s, "ratio": ratio, "limit": limit,
                              "pass": ratio is not None and ratio <= limit}
        warm_s, floor_s = summary[name]["warm"]["wall_s_median"], summary[FLOOR]["warm"]["wall_s_median"]
        to_floor = harness.ratio(warm_s, floor_s, digits=4)
        verdict["warm_to_floor"] = {"fwe_wall_s": warm_s, "floor_wall_s": floor_s, "ratio": to_floor,
                                    "limit": FLOOR_LIMIT, "pass": to_floor is not None and to_floor <= FLOOR_LIMIT}
        requests = summary[name]["warm"].get("fwe_requests_first_batch_max")
        verdict["warm_requests_first_batch"] = {"max": requests, "limit": WARM_REQUESTS,
                                                "pass": requests is not None and requests <= WARM_REQUESTS}
        verdict["pass"] = all(v["pass"] for v in verdict.values())
        verdicts[name] = verdict
    return verdicts


def prepare_root(args: argparse.Namespace, tmp: Path) -> tuple[Path, dict, bool]:
    """(root, manifest, reused)."""
    root = Path(args.root) if args.root else tmp / "hub"
    if (root / MANIFEST).exists():
        return root, orjson.loads((root / MANIFEST).read_bytes()), True
    say(f"building {args.mb:g} MB in {args.shards} shards under {root} ...")
    return root, build_repos(root, BuildSpec(mb=args.mb, shards=args.shards)), False


def parser() -> argparse.ArgumentParser:
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=3, help="Interleaved reps; figures: medians (default 3).")
    parser.add_argument("--rtt-ms", type=float, default=50.0, help="Added round-trip time in ms (default 50).")
    parser.add_argument("--handshake-rtts", type=int, default=2, help="Extra RTTs per new connection (default 2).")
    parser.add_argument("--root", default=None, help="hubsim root to reuse (or build into, if it holds no build).")
    parser.add_argument("--mb", type=float, default=280.0, help="Parquet MB when building (default 280).")
    parser.add_argument("--shards", type=int, default=14, help="Parquet shards when building (default 14).")
    parser.add_argument("--warmup", type=int, default=1, help="Unrecorded runs of each peer first (fresh HF_HOME): "
                                                              "the OS file cache (default 1).")
    parser.add_argument("--hub-reader", default="", help="Comma-separated `fwe smoke --hub-reader` values, one fwe "
                                                         "peer each (e.g. native,datasets); default: no such flag.")
    parser.add_argument("--fwe-arg", action="append", default=[], help="Extra fwe smoke argument (--fwe-arg=--flag).")
    parser.add_argument("--cdn-ttl-s", type=float, default=None, help="Redirect parquet resolves to signed CDN URLs "
                                                                      "valid this long (default: no redirect).")
    parser.add_argument("--check", action="store_true", help="Exit 3 when an fwe peer misses the acceptance ratios.")
    return parser


def main(argv: list[str] | None = None) -> int:
    bench_parser = parser()
    args = harness.parse(bench_parser, argv)
    if args.reps < 1 or args.rtt_ms < 0 or args.warmup < 0:
        bench_parser.error("--reps must be >= 1, --rtt-ms and --warmup >= 0")
    hub_readers = [r.strip() for r in args.hub_reader.split(",") if r.strip()]
    if hub_readers and not fwe_smoke_has("--hub-reader"):
        bench_parser.error("--hub-reader given but `fwe smoke --help` lists no --hub-reader flag (this fwe has none)")
    fwe_peers = peers(hub_readers, args.fwe_arg)
    names = [SCRIPT, FLOOR, *fwe_peers]
    started = utc_iso()
    load_before = os.getloadavg()
    runs: list[dict] = []
    warmups: list[dict] = []
    reference: np.ndarray | None = None
    identical = True
    with tempfile.TemporaryDirectory(prefix="bench-hub-start-") as tmp_name:
        tmp = Path(tmp_name)
        root, manifest, reused = prepare_root(args, tmp)
        (tmp / "batches").mkdir()
        with HubServer(root) as hub, \
                RttProxy(("127.0.0.1", hub.port), args.rtt_ms / 1000, args.handshake_rtts) as proxy, \
                redirecting_cdn(root, hub, args.cdn_ttl_s, args.rtt_ms / 1000, args.handshake_rtts) as cdn:
            def run(name: str, rep: int, cache: str, home: Path, into: list[dict]) -> None:
                nonlocal reference, identical
                record, batch = run_once(name, fwe_peers.get(name, []), rep, cache, len(warmups) + len(runs),
                                         proxy.url, home, tmp, hub, cdn)
                if batch is not None:
                    if reference is None:
                        reference = batch
                    record["batch_identical"] = bool(np.array_equal(batch, reference))
                    identical &= record["batch_identical"]
                into.append(record)
                fwe = (f" first_batch_s={record['first_batch_s']} fwe_requests={record['fwe_requests']}"
                       if name not in (SCRIPT, FLOOR) else "")
                say(f"rep {rep} {cache:6} {name:16} wall {record['wall_s']:.3f} s rc={record['rc']} "
                    f"server_requests={record['server_requests']}{fwe} load={record['load_1m_at_start']}")

            for i in range(args.warmup):  # pages in interpreters, packages and .pyc files; not in the figures
                for name in names:
                    run(name, -1 - i, "warmup", tmp / f"hf_home_warmup{i}_{name}", warmups)
            for rep in range(args.reps):
                order = harness.rotation(names, rep)
                homes = {name: tmp / f"hf_home_rep{rep}_{i}" for i, name in enumerate(names)}
                for cache in ("cold", "warm"):
                    for name in order:
                        run(name, rep, cache, homes[name], runs)
            commands = {name: shlex.join(command(name, fwe_peers.get(name, []), Path("<run>/batch.np" + (
                "y" if name == SCRIPT else "z")), Path("<run>/artifacts"))) for name in names}
            env = client_env(proxy.url, "<fresh per rep and peer>", "<run>/violations.jsonl")
        violations_file = tmp / "violations.jsonl"
        violations = violations_file.read_text().splitlines() if violations_file.exists() else []
    summary = summarise(runs, names)
    verdicts = acceptance(summary, list(fwe_peers))
    all_ok = all(r["ok"] for r in warmups + runs)
    report = {
        "kind": "bench_hub_start",
        "claim": "fwe smoke whole-process time <= 0.2x the datasets+tokenizers script cold, <= 0.12x warm, warm <= 1.5x "
                 "the floor (interpreter + one round trip), at most one request before a warm first batch (medians)",
        "started": started, "finished": utc_iso(),
        "settings": {"reps": args.reps, "warmup": args.warmup, "rtt_ms": args.rtt_ms, "cdn_ttl_s": args.cdn_ttl_s,
                     "handshake_rtts": args.handshake_rtts,
                     "batch": BATCH, "seq_len": SEQ_LEN, "hub_readers": hub_readers, "fwe_args": args.fwe_arg,
                     "order": "per rep: every peer cold, then every peer warm; peer order rotates each rep"},
        "root": {"path": str(args.root) if args.root else None, "reused": reused, "manifest": manifest},
        "commands": commands, "env": env, "cwd": str(REPO_ROOT),
        "summary": summary, "acceptance": verdicts,
        "pass": bool(verdicts) and all(v["pass"] for v in verdicts.values()),
        "all_runs_ok": all_ok, "first_batch_identical": identical and reference is not None,
        "sealed_violations": violations,
        "load_avg": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "runs": runs, "warmup_runs": warmups,
    }
    harness.write_result(NAME, args, report, str(REPO_ROOT))
    for name, verdict in verdicts.items():
        say(f"{name}: cold {verdict['cold']['ratio']}x the script (<= {LIMITS['cold']}: {verdict['cold']['pass']}), "
            f"warm {verdict['warm']['ratio']}x (<= {LIMITS['warm']}: {verdict['warm']['pass']}), warm "
            f"{verdict['warm_to_floor']['ratio']}x the floor (<= {FLOOR_LIMIT}: {verdict['warm_to_floor']['pass']}), "
            f"warm requests before the first batch {verdict['warm_requests_first_batch']['max']}")
    if not (all_ok and report["first_batch_identical"] and not violations):
        return 1
    return 3 if args.check and not report["pass"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

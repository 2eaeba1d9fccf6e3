"""Run the test Hub by hand: build repos, then serve them (with faults) for `fwe smoke` / `fwe measure`.

    python -m tests.hubsim build --root /tmp/hub --mb 300 --shards 8
    python -m tests.hubsim serve --root /tmp/hub --port 0 --rtt-ms 50 --log /tmp/hub-requests.jsonl
    # prints: export HF_ENDPOINT=http://127.0.0.1:PORT   (then, in another shell, fwe smoke --source hub ...)
    python -m tests.hubsim bench --root /tmp/hub --rtt-ms 0,50,200 --out artifacts/hubsim/rtt_bench.json

See runbooks/hub-test-server.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

import orjson

from tests.hubsim.clientenv import SEALED_DIR
from tests.hubsim.faults import Faults
from tests.hubsim.repos import BuildSpec, build_repos


def _build(args: argparse.Namespace) -> int:
    spec = BuildSpec(mb=args.mb, shards=args.shards, seed=args.seed, row_group_rows=args.row_group_rows)
    print(f"building {args.mb:g} MB in {args.shards} shards under {args.root} ...", file=sys.stderr)
    manifest = build_repos(args.root, spec, progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    sys.stdout.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def _faults(args: argparse.Namespace) -> Faults:
    return Faults(delay_s=args.delay_ms / 1000, fail_count=args.fail, fail_status=args.fail_status,
                  retry_after=args.retry_after, fail_match=args.fail_match, fail_distinct=args.fail_distinct,
                  drop_after_bytes=args.drop_after_bytes, drop_count=args.drop_count, drop_match=args.drop_match,
                  stall_match=args.stall_match, burst_every=args.burst_every, burst_delay_s=args.burst_ms / 1000,
                  burst_match=args.burst_match, hangup_match=args.hangup_match, unanswered_count=args.unanswered,
                  unanswered_match=args.unanswered_match, redirect_match=args.redirect_match,
                  redirect_to=args.redirect_to, sign_ttl_s=args.sign_ttl_s, refuse_ranges=args.refuse_ranges)


def _print_request(record: dict) -> None:
    fault = f"  [{record['fault']}]" if record["fault"] else ""
    rng = f" {record['range']}" if record["range"] else ""
    print(f"{record['t']:8.3f}s conn {record['conn']:<3} {record['status']} {record['method']} {record['path']}{rng}"
          f" ({record['bytes']} B){fault}", file=sys.stderr, flush=True)


def _serve(args: argparse.Namespace) -> int:
    from tests.hubsim.proxy import RttProxy
    from tests.hubsim.server import HubServer

    if not (Path(args.root) / "datasets").is_dir():
        print(f"error: {args.root} holds no repos; build them first: python -m tests.hubsim build --root {args.root}",
              file=sys.stderr)
        return 2
    done = threading.Event()  # SIGTERM stops cleanly from the moment the endpoint can be known, not after the prints
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    hub = HubServer(args.root, host=args.host, port=args.port if args.rtt_ms is None else 0,
                    faults=_faults(args), log_path=args.log, on_request=None if args.quiet else _print_request)
    hub.start()
    proxy = None
    endpoint = hub.url
    if args.rtt_ms is not None:
        proxy = RttProxy(("127.0.0.1", hub.port), rtt_s=args.rtt_ms / 1000, handshake_rtts=args.handshake_rtts,
                         host=args.host, port=args.port).start()
        endpoint = proxy.url
    print(f"export HF_ENDPOINT={endpoint}", flush=True)
    info = {"root": args.root, "server": hub.url, "faults": hub.fault_state.faults.describe(),
            "rtt_ms": args.rtt_ms, "log": args.log}
    print(f"hubsim serving {orjson.dumps(info).decode()}", file=sys.stderr)
    print(f"for sealed clients: export PYTHONPATH={SEALED_DIR}:$PYTHONPATH HF_UPDATE_DOWNLOAD_COUNTS=0 "
          "HF_HUB_DISABLE_TELEMETRY=1; Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    if proxy is not None:
        proxy.stop()
    hub.stop()
    print(f"stopped after {len(hub.log)} requests", file=sys.stderr)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from fwe_cli.artifacts import write_json
    from tests.hubsim.bench import run_bench

    try:
        rtts = [float(x) for x in args.rtt_ms.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--rtt-ms must be comma-separated numbers, got {args.rtt_ms!r}") from None
    smoke_args = ["--tokenizer", args.tokenizer, "--batches", str(args.batches), "--batch", str(args.batch),
                  "--seq-len", str(args.seq_len)]
    print(f"bench: cold+warm fwe smoke at RTT {rtts} ms against {args.root}", file=sys.stderr)
    report = run_bench(args.root, rtts, smoke_args, timeout=args.timeout,
                       progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    print(write_json(args.out, report))
    return 0 if all(run["ok"] for run in report["runs"]) and not report["sealed_violations"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.hubsim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="Build Hub-like repos (fineweb-edu sample-10BT + gpt2 tokenizer).")
    build.add_argument("--root", required=True, help="Folder to build into (created; shards replaced).")
    build.add_argument("--mb", type=float, default=3.0, help="Total parquet size in MB (default 3; benchmarks: 300).")
    build.add_argument("--shards", type=int, default=2, help="Number of parquet shards (default 2).")
    build.add_argument("--seed", type=int, default=0, help="Synthetic record seed (default 0).")
    build.add_argument("--row-group-rows", type=int, default=1000, help="Rows per row group (default 1000, as real).")
    build.set_defaults(run=_build)

    serve = commands.add_parser("serve", help="Serve a built root on 127.0.0.1; prints the HF_ENDPOINT to export.")
    serve.add_argument("--root", required=True, help="Folder made by `build`.")
    serve.add_argument("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
    serve.add_argument("--port", type=int, default=0, help="Port (default 0: any free port).")
    serve.add_argument("--log", default=None, help="Write a JSON line per request to this file (emptied first).")
    serve.add_argument("--quiet", action="store_true", help="Do not print each request on stderr.")
    faults = serve.add_argument_group("faults (regexes match 'METHOD /path?query[ range=bytes=A-B]')")
    faults.add_argument("--delay-ms", type=float, default=0.0, help="Added delay before every answer.")
    faults.add_argument("--rtt-ms", type=float, default=None, help="Added round-trip time, via a TCP proxy.")
    faults.add_argument("--handshake-rtts", type=int, default=2, help="Extra RTTs per new connection (TCP+TLS: 2).")
    faults.add_argument("--fail", type=int, default=0, help="Answer the first N matching requests with --fail-status.")
    faults.add_argument("--fail-status", type=int, default=503, help="Status for --fail (503 or 429; default 503).")
    faults.add_argument("--retry-after", type=int, default=None, help="Retry-After seconds sent with failures.")
    faults.add_argument("--fail-match", default="", help="Regex choosing requests for --fail (default: all).")
    faults.add_argument("--fail-distinct", action="store_true",
                        help="Fail each distinct request at most once (a client's retry then succeeds).")
    faults.add_argument("--drop-after-bytes", type=int, default=None, help="Cut a matching answer after K body bytes.")
    faults.add_argument("--drop-count", type=int, default=1, help="How many answers to cut (default 1).")
    faults.add_argument("--drop-match", default="", help="Regex choosing answers to cut (default: all).")
    faults.add_argument("--stall-match", default=None, help="Regex choosing requests never answered.")
    faults.add_argument("--burst-every", type=int, default=0,
                        help="Make about one in N distinct requests matching --burst-match late by --burst-ms, "
                             "the same ones on every run (default 0: none).")
    faults.add_argument("--burst-ms", type=float, default=300.0, help="How late a burst answer is (default 300).")
    faults.add_argument("--burst-match", default="", help="Regex choosing requests counted for bursts (default: all).")
    faults.add_argument("--hangup-match", default=None,
                        help="Regex choosing requests whose connection is closed after the answer, unannounced.")
    faults.add_argument("--unanswered", type=int, default=0,
                        help="Close the connection of the first N matching requests instead of answering them.")
    faults.add_argument("--unanswered-match", default="", help="Regex choosing requests for --unanswered (default all).")
    faults.add_argument("--redirect-match", default=None, help="Regex choosing requests answered 302 to --redirect-to.")
    faults.add_argument("--redirect-to", default="",
                        help="Base URL of the redirects, e.g. another server as a CDN (default: this one: a loop).")
    faults.add_argument("--sign-ttl-s", type=float, default=None,
                        help="A resolve's redirect leads to a signed CDN URL valid this many seconds, as the Hub's "
                             "does (with --redirect-to '': this server's own /cdn/, a relative Location).")
    faults.add_argument("--refuse-ranges", action="store_true",
                        help="This server's /cdn/ paths ignore Range (answer the whole file, 200).")
    serve.set_defaults(run=_serve)

    bench = commands.add_parser("bench", help="Cold+warm fwe smoke under added RTTs; JSON with first_batch_s "
                                              "and the server's request counts.")
    bench.add_argument("--root", required=True, help="Folder made by `build`.")
    bench.add_argument("--rtt-ms", default="0,50,200", help="Comma-separated RTTs in ms (default 0,50,200).")
    bench.add_argument("--out", default="artifacts/hubsim/rtt_bench.json", help="Where to write the JSON.")
    bench.add_argument("--tokenizer", default="gpt2", help="fwe smoke --tokenizer (default gpt2, from the server).")
    bench.add_argument("--batches", type=int, default=3, help="fwe smoke --batches (default 3).")
    bench.add_argument("--batch", type=int, default=8, help="fwe smoke --batch (default 8).")
    bench.add_argument("--seq-len", type=int, default=2048, help="fwe smoke --seq-len (default 2048).")
    bench.add_argument("--timeout", type=float, default=120.0, help="fwe smoke --timeout per run (default 120).")
    bench.set_defaults(run=_bench)

    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

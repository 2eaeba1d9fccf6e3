"""Benchmark: what one reader of a many-reader job reads. Each reader is dealt its own units before anything is read
(fwe_cli/loader/sources/deal.py), so reader r of W should fetch and parse about 1/W of an epoch, not all of it.

Against the test Hub (tests/hubsim: --files parquet files of about --mb MB in all) it runs, each in a fresh process
and a cold HF_HOME, every reader of W = 1, 3 and 8 to the end of the epoch, and one rank whose torchdata
StatefulDataLoader has 3 workers; over one local JSONL file of about --local-mb MB (real FineWeb text from
../shared when present), W = 1 and 8. Per reader: the parquet bytes the server sent it (its request log), its
documents and tokens, and its process's CPU seconds (with its DataLoader workers; the median of --reps runs), minus
the median of as many one-batch runs of the same settings: CPU past start-up. Ratios are against the one reader of the whole epoch, measured in the same run:

    acceptance: rank r of 3 <= 0.45x the bytes, rank r of 8 <= 0.2x; 3 DataLoader workers <= 1.3x in all;
                CPU past start-up of rank r of 8 <= 0.2x, on the Hub and on the local file (the largest r counts)

    python -m scripts.bench.reader_share [--mb 124] [--files 8] [--local-mb 120] [--out artifacts/bench]

Batches are 8 x 1024 byte tokens (the tokenizer costs little: what is measured is reading). Writes
artifacts/bench/reader_share-<UTC>.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import orjson

from scripts.bench import harness
from scripts.bench.harness import say

NAME = "reader_share"
TARGETS = {"bytes_of_3": 0.45, "bytes_of_8": 0.2, "bytes_dataloader_3": 1.3, "cpu_of_8_hub": 0.2,
           "cpu_of_8_local": 0.2}
SHAPE = dict(tokenizer="byte", seq_len=1024, batch_size=8, report_docs=0)


def child(args) -> dict:
    """One reader's run in this process: to the end of the epoch (or `--batches`), its counts and CPU seconds."""
    from fwe_cli.loader import FineWebLoader, resolve_config

    source = dict(source="hub", hub_cache=False) if args.kind == "hub" else dict(local_path=args.data)
    config = resolve_config(env={}, shard_mod=args.readers, shard_rem=args.reader, **source, **SHAPE)
    batches = tokens = 0
    started = time.perf_counter()
    if args.workers:
        from torchdata.stateful_dataloader import StatefulDataLoader

        from fwe_cli.loader import FineWebDataset

        loader = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=args.workers)
        for batch in loader:
            batches, tokens = batches + 1, tokens + batch.numel()
            if batches == args.batches:
                break
        del loader  # its workers end (and are waited for: their CPU counts below)
        docs = None
    else:
        with FineWebLoader(config) as loader:
            for batch in loader:
                batches, tokens = batches + 1, tokens + batch.size
                if batches == args.batches:
                    break
            docs = loader.stats()["docs"]
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return {"batches": batches, "tokens": tokens, "docs": docs, "wall_s": time.perf_counter() - started,
            "cpu_s": sum(u.ru_utime + u.ru_stime for u in usage)}


def run_reader(args, kind: str, readers: int, reader: int, batches: int = 0, workers: int = 0, run=None) -> dict:
    """A reader's run in a fresh interpreter (on the Hub: a cold HF_HOME, the server's log of what it sent)."""
    cmd = [sys.executable, "-m", "scripts.bench.reader_share", "--child", kind, "--readers", str(readers),
           "--reader", str(reader), "--batches", str(batches), "--workers", str(workers), "--data", args.data or ""]
    env = None
    if run is not None:
        run.new_log(f"{kind}-{readers}-{reader}-{batches}-{workers}")
        env = {**os.environ, **run.env(run.new_home())}
    result = harness.run_json(cmd, f"reader {reader} of {readers}", env=env, timeout=args.run_timeout)
    if run is not None:
        result["parquet_bytes"] = sum(r.get("bytes") or 0 for r in run.requests() if r["path"].endswith(".parquet"))
    return result


def world(args, kind: str, readers: int, run=None, workers: int = 0) -> list[dict]:
    """Every reader of a world: `--reps` runs to the end and as many one-batch runs each, interleaved; CPU past
    start-up is the difference of their medians, the bytes are the first run's (the same every time)."""
    out = []
    for reader in range(readers):
        wholes, starts = [], []
        for _ in range(args.reps):
            wholes.append(run_reader(args, kind, readers, reader, workers=workers, run=run))
            starts.append(run_reader(args, kind, readers, reader, batches=1, workers=workers, run=run))
        whole = dict(wholes[0], cpu_s=harness.median(w["cpu_s"] for w in wholes), cpu_runs=[w["cpu_s"] for w in wholes],
                     cpu_one_batch_s=harness.median(s["cpu_s"] for s in starts), reader=reader)
        whole["cpu_past_startup_s"] = whole["cpu_s"] - whole["cpu_one_batch_s"]
        out.append(whole)
        say(f"{kind} reader {reader} of {readers}{f' ({workers} DataLoader workers)' if workers else ''}: "
            f"{whole['batches']} batches, {whole.get('parquet_bytes', 0) / 1e6:.1f} MB served, "
            f"CPU {whole['cpu_s']:.2f} s ({whole['cpu_past_startup_s']:.2f} s past start-up)")
    return out


def ratios(runs: list[dict], one: dict, key: str) -> dict:
    """Each reader's `key` against the one reader's, and the largest."""
    each = [harness.ratio(r[key], one[key]) for r in runs]
    return {"each": each, "max": max(v for v in each if v is not None) if any(v is not None for v in each) else None}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--mb", type=float, default=124.0, help="the test Hub's parquet files, MB in all (default 124)")
    parser.add_argument("--files", type=int, default=8, help="its parquet files (default 8)")
    parser.add_argument("--rows", type=int, default=1000, help="rows per row group (default 1000)")
    parser.add_argument("--local-mb", type=float, default=120.0, help="the local JSONL file's size (default 120)")
    parser.add_argument("--root", default=None, help="test Hub repos built before (python -m tests.hubsim build)")
    parser.add_argument("--synthetic", action="store_true", help="local text: synthetic even when real text is present")
    parser.add_argument("--reps", type=int, default=3, help="runs of each reader, for the CPU medians (default 3)")
    parser.add_argument("--run-timeout", type=float, default=900.0, help="seconds one reader's run may take")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "fwe_bench_data"))
    parser.add_argument("--child", choices=["hub", "local"], help=argparse.SUPPRESS)
    for flag in ("--readers", "--reader", "--batches", "--workers"):
        parser.add_argument(flag, type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    child_run = "--child" in (sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv) if child_run else harness.parse(parser(), argv)
    if args.child:
        args.kind = args.child
        sys.stdout.write(orjson.dumps(child(args)).decode() + "\n")
        return 0
    from scripts.bench.corpus import build_corpus, warm_page_cache
    from tests.hubsim.fixtures import HubRun
    from tests.hubsim.repos import BuildSpec, build_repos
    from tests.hubsim.server import HubServer

    record: dict = {"shape": SHAPE, "targets": TARGETS, "loadavg_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-reader-share-") as tmp:
        root = args.root
        if root is None:
            root = str(Path(tmp) / "hub")
            say(f"building the test Hub: {args.files} files, about {args.mb:g} MB ...")
            build_repos(root, BuildSpec(mb=args.mb, shards=args.files, row_group_rows=args.rows))
        files = sorted((Path(root) / "datasets").rglob("*.parquet"))
        record["hub"] = {"root": root, "parquet_files": len(files), "parquet_mb": sum(f.stat().st_size for f in files) / 1e6}
        with HubServer(root) as server:
            run = HubRun(server, Path(tmp) / "runs")
            args.data = None
            hub = {str(w): world(args, "hub", w, run) for w in (1, 3, 8)}
            hub["dataloader_3"] = [run_reader(args, "hub", 1, 0, workers=3, run=run)]
            run.close()
        data, kind = build_corpus(args.data_dir, args.local_mb, args.synthetic)
        warm_page_cache(data)
        args.data = data
        local = {str(w): world(args, "local", w) for w in (1, 8)}
        record["local"] = {"file": data, "text": kind, "mb": os.path.getsize(data) / 1e6}
    one_hub, one_local = hub["1"][0], local["1"][0]
    figures = {
        "bytes_of_3": ratios(hub["3"], one_hub, "parquet_bytes"),
        "bytes_of_8": ratios(hub["8"], one_hub, "parquet_bytes"),
        "bytes_dataloader_3": ratios(hub["dataloader_3"], one_hub, "parquet_bytes"),
        "cpu_of_8_hub": ratios(hub["8"], one_hub, "cpu_past_startup_s"),
        "cpu_of_8_local": ratios(local["8"], one_local, "cpu_past_startup_s"),
    }
    record.update(runs={"hub": hub, "local": local}, figures=figures, loadavg_after=os.getloadavg(),
                  acceptance={name: {"max": figures[name]["max"], "target": target,
                                     "ok": figures[name]["max"] is not None and figures[name]["max"] <= target}
                              for name, target in TARGETS.items()})
    path = harness.write_result(NAME, args, record, args.data_dir)
    say("; ".join(f"{name} {figures[name]['max']} (<= {target})" for name, target in TARGETS.items()) + f"  ->  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

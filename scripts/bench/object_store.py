"""Object-store sources and bootstrap targets against moto's S3 server (tests/s3sim: its fault layer keeps connections
open, as S3 does) behind a 50 ms round trip (tests/hubsim's RttProxy), every contender in the same run, figures as
ratios:

- first batch (8 x 1024 GPT-2 tokens, a fresh interpreter each): fwe over s3:// parquet against the peer a user
  would write, `datasets.load_dataset("parquet", data_files="s3://...", streaming=True, storage_options=...)` and
  tokenizers; cold (a fresh cache) and warm (the same cache again: fwe keeps the footers);
- steady tokens/s over s3:// against the same files on local disk (fwe both: the tokenizer's bound), timed once the
  tokenizer's one-time tiktoken check has ended (it runs beside the first batches, ~0.25 s of CPU); with --pin the
  simulated store (this process: moto and its proxies) keeps the last core to itself and both contenders run on the
  others, as a store on other machines would leave them, and the store's own rate is measured (8 range GETs in
  flight over every object);
- each of W = 8 readers' bytes and requests per epoch, against the whole (ideal 1/8);
- a bootstrap's upload (bootstrap.bucket: 8 requests in flight, each answer's ETag checked, the manifest last)
  against s3fs's `put` of the same files with the same concurrency (what `aws s3 sync` does), connections open;
- an upload (multipart: pieces of a quarter of a part) killed with SIGKILL once half its pieces are recorded, then
  resumed: the pieces recorded before the kill that were sent again (target 0) and the bucket's parts whole.

    python -m scripts.bench.object_store [--mb 48] [--reps 3] [--out artifacts/bench]
"""

from __future__ import annotations

import io
import os
import re
import sys
import tempfile
import time
import uuid

import orjson

from scripts.bench import harness
from scripts.bench.harness import say

NAME = "object_store"
SHAPE = {"seq_len": 1024, "batch_size": 8}
SETTLE_MAX = 200  # batches a steady run waits at most for the tokenizer's tiktoken check to end before it is timed


def _child(kind: str, url: str, tokenizer: str, steady: int, readers: int, reader: int) -> dict:
    """One measured run in this (fresh) process: seconds to the first batch, then `steady` batches' tokens/s, the
    bytes and requests the store served."""
    if os.environ.get("BENCH_CPUS"):  # --pin: this run's cores (its tokenizer's threads, made later, inherit them)
        os.sched_setaffinity(0, {int(cpu) for cpu in os.environ["BENCH_CPUS"].split(",")})
    started = time.perf_counter()
    if kind == "datasets":
        import datasets
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(tokenizer)
        files = [f"{url}/{name}" for name in orjson.loads(os.environ["BENCH_FILES"])]
        stream = iter(datasets.load_dataset("parquet", data_files=files, split="train", streaming=True,
                                            storage_options={"client_kwargs": {
                                                "endpoint_url": os.environ["AWS_ENDPOINT_URL"]}}))
        need, have = SHAPE["seq_len"] * SHAPE["batch_size"], 0
        while have < need:
            have += len(tok.encode(next(stream)["text"]).ids) + 1
        return {"first_batch_s": time.perf_counter() - started}
    from fwe_cli.loader import FineWebLoader, resolve_config

    config = resolve_config(env={}, local_path=url, tokenizer=tokenizer, shard_mod=readers, shard_rem=reader,
                            tokenizer_threads=int(os.environ.get("BENCH_THREADS", "0")),
                            epochs=int(os.environ.get("BENCH_EPOCHS", "1")), **SHAPE)
    with FineWebLoader(config) as loader:
        batches = iter(loader)
        next(batches)
        first = time.perf_counter() - started
        settle = 0  # steady: past the one-time check that hands the tokenizer's work to tiktoken (both contenders)
        while steady and settle < SETTLE_MAX and (loader.stats()["tokenizer"] or {}).get("check_s") is None:
            if next(batches, None) is None:  # a share that ended first (the W = 8 runs read theirs whole)
                break
            settle += 1
        t0, cpu0, taken = time.perf_counter(), time.process_time(), 0
        for _ in batches if steady else ():  # a first batch's run ends at it
            taken += 1
            if taken == steady:
                break
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        source = loader.stats()["source"]
    tokens = taken * SHAPE["seq_len"] * SHAPE["batch_size"]
    return {"first_batch_s": first, "tokens_per_s": tokens / seconds if taken else None,
            "tokens_per_cpu_s": tokens / cpu if taken and cpu > 0 else None, "settle_batches": settle,
            "object_store": source.get("object_store")}


def _parquet_files(directory: str, mb: float, files: int) -> list[str]:
    """The names of `files` parquet files in `directory`/data of about mb/files MB of FineWeb-like records
    (scripts.bench.corpus, built in `directory`/corpus), in at least 16 row groups each (FineWeb-Edu's files hold ~700
    of 1,000 rows: a reader's share is many row groups)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scripts.bench.corpus import build_corpus, read_texts

    texts = read_texts(build_corpus(os.path.join(directory, "corpus"), mb)[0])
    names, per = [], -(-len(texts) // files)
    os.makedirs(os.path.join(directory, "data"), exist_ok=True)
    for i in range(files):
        part = texts[i * per:(i + 1) * per]
        name = f"train-{i:05d}.parquet"
        pq.write_table(pa.table({"text": part, "id": [f"doc{i}-{j}" for j in range(len(part))]}),
                       os.path.join(directory, "data", name), row_group_size=max(20, min(1000, per // 16)))
        names.append(name)
    return names


def _first_batches(args, env, url, tokenizer, files, cache) -> dict:
    out: dict = {}
    for state in ("cold", "warm"):
        runs = {"fwe": [], "datasets": []}
        for rep in range(args.reps):
            for kind in harness.rotation(list(runs), rep):
                run_env = dict(env, HF_HOME=cache if state == "warm" else tempfile.mkdtemp(prefix="fwe-cold-"),
                               BENCH_FILES=orjson.dumps(files).decode())
                cmd = [sys.executable, "-m", "scripts.bench.object_store", "--child", kind, url, tokenizer, "0", "1",
                       "0"]
                runs[kind].append(harness.run_json(cmd, f"{kind} {state}", env=run_env)["first_batch_s"])
        fwe, peer = harness.median(runs["fwe"], 3), harness.median(runs["datasets"], 3)
        out[state] = {"fwe_s": runs["fwe"], "datasets_s": runs["datasets"], "ratio": round(fwe / peer, 3)}
        say(f"first batch {state}: fwe {fwe:.2f} s, datasets {peer:.2f} s ({fwe / peer:.2f}x)")
    return out


def _pin_threads(cpus: set[int]) -> None:
    """Every thread of this process on `cpus` (a thread's affinity is its own: moto's and the proxies' threads run
    already; the ones they start later inherit it)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # ended meanwhile
            pass


def _store_rate(env: dict, bucket: str, files: list[str]) -> float:
    """MB/s the simulated store serves (its 50 ms round trip included): every object read once in 8 MiB range GETs,
    8 in flight, by a client on the cores the steady runs had (`env`'s BENCH_CPUS; a fresh process, timed past its
    imports and the objects' sizes)."""
    code = ("import os, sys, time, concurrent.futures as cf, s3fs, orjson; "
            "os.sched_setaffinity(0, {int(c) for c in os.environ['BENCH_CPUS'].split(',')}); "
            "fs = s3fs.S3FileSystem(client_kwargs={'endpoint_url': os.environ['AWS_ENDPOINT_URL']}); "
            "paths = sys.argv[1:]; sizes = [fs.size(p) for p in paths]; step = 8 << 20; "
            "spans = [(p, a, min(a + step, n)) for p, n in zip(paths, sizes) for a in range(0, n, step)]; "
            "t = time.perf_counter(); "
            "got = sum(cf.ThreadPoolExecutor(8).map(lambda s: len(fs.cat_file(s[0], start=s[1], end=s[2])), spans)); "
            "print(orjson.dumps({'mb_per_s': got / 1e6 / (time.perf_counter() - t)}).decode())")
    rate = harness.run_json([sys.executable, "-c", code, *(f"{bucket}/data/{name}" for name in files)], "store rate",
                            env=env)["mb_per_s"]
    say(f"the simulated store serves {rate:.0f} MB/s (8 range GETs of 8 MiB in flight)")
    return round(rate, 1)


def _upload(args, sim, endpoint, staging) -> dict:
    """bootstrap.bucket's upload against s3fs put of the same files, same concurrency, each with its connections
    open (one untimed run first: what a long upload pays once is not what the ratio compares)."""
    import s3fs

    from fwe_cli.bootstrap.bucket import UPLOADS, upload_bootstrap
    from fwe_cli.bootstrap.upload_journal import JOURNAL

    files = [os.path.join(staging, e["name"]) for e in _manifest(staging)["files"]]
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
    ours, peers = [], []
    for rep in range(args.reps + 1):
        bucket = f"up-{uuid.uuid4().hex[:10]}"
        sim.bucket(bucket)
        for kind in harness.rotation(["fwe", "s3fs"], rep):
            t0 = time.perf_counter()
            if kind == "fwe":
                if os.path.exists(os.path.join(staging, JOURNAL)):
                    os.remove(os.path.join(staging, JOURNAL))
                upload_bootstrap(staging, f"s3://{bucket}/fwe")
            else:
                fs.put(files, [f"{bucket}/s3fs/{os.path.basename(f)}" for f in files], batch_size=UPLOADS)
            if rep:  # rep 0 opens the connections
                (ours if kind == "fwe" else peers).append(time.perf_counter() - t0)
    fwe, peer = harness.median(ours, 3), harness.median(peers, 3)
    say(f"upload: fwe {fwe:.2f} s, s3fs put {peer:.2f} s (speed {peer / fwe:.2f}x)")
    return {"fwe_s": ours, "s3fs_put_s": peers, "speed_ratio": round(peer / fwe, 3), "uploads": UPLOADS}


def _manifest(staging: str) -> dict:
    return orjson.loads(open(os.path.join(staging, "manifest.json"), "rb").read())


def _killed_upload(sim, env, staging) -> dict:
    """An upload in a child process killed (SIGKILL) once half its pieces are recorded, then resumed here: which of
    the pieces recorded before the kill were sent again (none should be), and how many pieces the resume sent. The
    pieces are a quarter of a part (at least 64 KiB), so every part is a multipart upload."""
    import subprocess

    from fwe_cli.bootstrap.bucket import Upload
    from fwe_cli.bootstrap.upload_journal import JOURNAL

    manifest = _manifest(staging)
    piece = max(64 << 10, max(e["bytes"] for e in manifest["files"]) // 4)
    total = sum(-(-e["bytes"] // piece) for e in manifest["files"])
    journal, bucket = os.path.join(staging, JOURNAL), f"kill-{uuid.uuid4().hex[:10]}"
    sim.bucket(bucket)
    if os.path.exists(journal):
        os.remove(journal)
    url = f"s3://{bucket}/boot"
    child = subprocess.Popen([sys.executable, "-m", "scripts.bench.object_store", "--child-upload", staging, url,
                              str(piece)], env=env, cwd=harness.REPO_ROOT)
    while child.poll() is None and len(_recorded(journal)) < total // 2:
        time.sleep(0.005)  # a benchmark polls the journal; the kill lands where it lands
    child.kill()
    child.wait()
    recorded = _recorded(journal)
    sim.clear_log()
    resumed = Upload(staging, url, piece=piece).run(manifest)
    again = {(path.split("?")[0].rsplit("/", 1)[1], int(n[1]) if (n := re.search(r"partNumber=(\d+)", path)) else 0)
             for method, path, _ in sim.requests("PUT", f"/{bucket}/boot/part-")}
    finished_again = sorted(again & recorded)
    say(f"killed upload: {len(recorded)} of {total} pieces recorded at the kill; the resume sent "
        f"{resumed['pieces_sent']}, {len(finished_again)} of them recorded before the kill")
    return {"pieces": total, "piece_bytes": piece, "recorded_at_kill": len(recorded),
            "sent_on_resume": resumed["pieces_sent"], "recorded_sent_again": len(finished_again),
            "whole": b"".join(sim.get(bucket, f"boot/{e['name']}") for e in manifest["files"]) == b"".join(
                open(os.path.join(staging, e["name"]), "rb").read() for e in manifest["files"])}


def _recorded(journal: str) -> set[tuple[str, int]]:
    """(part, piece number) of every piece the journal records sent (number 0: a part put whole)."""
    try:
        lines = open(journal, "rb").read().split(b"\n")[1:-1]
    except FileNotFoundError:
        return set()
    events = [orjson.loads(line) for line in lines]
    pieces = {(e["part"], e["n"]) for e in events if "n" in e}
    return pieces | {(e["part"], 0) for e in events if "done" in e and not any(p == e["part"] for p, _ in pieces)}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--mb", type=float, default=48, help="MB of text in the bucket (default 48)")
    parser.add_argument("--files", type=int, default=4, help="parquet files (default 4)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each contender (default 3)")
    parser.add_argument("--rtt-ms", type=float, default=50, help="round trip to the store (default 50)")
    parser.add_argument("--steady", type=int, default=40, help="batches timed after the first (default 40)")
    parser.add_argument("--tokenizer-threads", type=int, default=0,
                        help="tokenizer threads of the steady runs (default 0: one per core; the simulated store "
                             "runs on this machine's cores too: 1 leaves it one on a 2-core machine)")
    parser.add_argument("--pin", action="store_true",
                        help="steady runs: the simulated store on the last core alone, both contenders on the others "
                             "(Linux; needs 2 cores or more)")
    parser.add_argument("--child", nargs=6, help=argparse_hidden())
    parser.add_argument("--child-upload", nargs=3, help=argparse_hidden())
    return parser


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def main(argv: list[str] | None = None) -> int:
    child = argv if argv is not None else sys.argv[1:]
    args = parser().parse_args(argv) if {"--child", "--child-upload"} & set(child) else harness.parse(parser(), argv)
    if args.child_upload:
        from fwe_cli.bootstrap.bucket import Upload

        staging, url, piece = args.child_upload
        Upload(staging, url, piece=int(piece)).run(_manifest(staging))
        return 0
    if args.child:
        kind, url, tokenizer, steady, readers, reader = args.child
        print(orjson.dumps(_child(kind, url, tokenizer, int(steady), int(readers), int(reader))).decode(), flush=True)
        if kind == "datasets":  # its figure is taken: the peer's teardown (pyarrow's and datasets' threads) sometimes
            os._exit(0)  # aborts the interpreter ("terminate called without an active exception"), which is not ours
        return 0
    from scripts.bench.corpus import gpt2_tokenizer
    from tests.hubsim.proxy import RttProxy
    from tests.s3sim.server import S3Sim

    from fwe_cli.bootstrap.config import bootstrap_config
    from fwe_cli.bootstrap.run import run_bootstrap

    cores = sorted(os.sched_getaffinity(0))
    if args.pin and len(cores) < 2:
        raise SystemExit(f"object_store: --pin needs 2 cores or more; this process may use {len(cores)}")
    work = tempfile.mkdtemp(prefix="fwe-bench-s3-")
    tokenizer = gpt2_tokenizer(work)
    files = _parquet_files(work, args.mb, args.files)
    local = os.path.join(work, "data")  # the local contender reads these files and nothing else
    with S3Sim() as sim, RttProxy(sim.address, rtt_s=args.rtt_ms / 1000) as proxy:  # keep-alive, as S3
        bucket = f"bench-{uuid.uuid4().hex[:10]}"
        sim.bucket(bucket)
        for name in files:
            sim.client.upload_file(os.path.join(local, name), bucket, f"data/{name}")
        env = harness.child_env(**sim.env(proxy.url))
        url, cache = f"s3://{bucket}/data", tempfile.mkdtemp(prefix="fwe-warm-")
        total = sum(os.path.getsize(os.path.join(local, name)) for name in files)
        record: dict = {"mb": args.mb, "rtt_ms": args.rtt_ms, "object_bytes": total}
        record["first_batch"] = _first_batches(args, env, url, tokenizer, files, cache)
        steady_env = dict(env, HF_HOME=cache, BENCH_THREADS=str(args.tokenizer_threads),
                          BENCH_EPOCHS="1000")  # the files again and again: a small bucket never ends a steady run
        if args.pin:  # the store's threads on the last core, the runs on the others
            _pin_threads({cores[-1]})
            steady_env["BENCH_CPUS"] = ",".join(str(cpu) for cpu in cores[:-1])
        done = harness.interleaved(args.reps, {kind: lambda rep, where=where: harness.run_json(
            [sys.executable, "-m", "scripts.bench.object_store", "--child", "fwe", where, tokenizer, str(args.steady),
             "1", "0"], "steady", env=steady_env
        ) for kind, where in (("s3", url), ("local", local))})
        if args.pin:
            record["store_mb_per_s"] = _store_rate(steady_env, bucket, files)
            _pin_threads(set(cores))
        runs = {kind: [run["tokens_per_s"] for run in kind_runs] for kind, kind_runs in done.items()}
        per_cpu = {kind: [run["tokens_per_cpu_s"] for run in kind_runs] for kind, kind_runs in done.items()}
        steady = {kind: harness.median(values) for kind, values in runs.items()}
        cpu = {kind: harness.median(values) for kind, values in per_cpu.items()}
        # the loader's own process's CPU: the simulated store (moto and its proxies) runs in this one, on the same
        # two cores, so tokens per CPU-second of the loader is what an S3 reader costs beside reading local files
        record["steady"] = dict(steady, runs=runs, threads=args.tokenizer_threads, pinned=args.pin,
                                ratio=round(steady["s3"] / steady["local"], 3),
                                per_cpu_s=dict(cpu, runs=per_cpu, ratio=round(cpu["s3"] / cpu["local"], 3)))
        say(f"steady: s3 {steady['s3']:.0f} tokens/s, local {steady['local']:.0f} ({record['steady']['ratio']}x); "
            f"per CPU-second of the loader {cpu['s3']:.0f} and {cpu['local']:.0f} "
            f"({record['steady']['per_cpu_s']['ratio']}x)")
        readers = []
        for reader in range(8):
            cmd = [sys.executable, "-m", "scripts.bench.object_store", "--child", "fwe", url, tokenizer, "100000",
                   "8", str(reader)]
            store = harness.run_json(cmd, f"reader {reader}", env=dict(env, HF_HOME=cache))["object_store"]
            readers.append({"bytes": store["bytes_read"], "requests": store["requests"],
                            "share": round(store["bytes_read"] / total, 4)})
        record["readers_w8"] = {"readers": readers, "max_share": max(r["share"] for r in readers)}
        say(f"W=8: largest reader share {record['readers_w8']['max_share']:.3f} of the bytes, requests "
            f"{[r['requests'] for r in readers]}")
        staging = tempfile.mkdtemp(prefix="fwe-staged-")
        run_bootstrap(bootstrap_config(out=staging, gb=args.mb / 1000, local_path=os.path.join(work, "corpus"),
                                       file_mb=args.mb / 8, force=True))
        os.environ.update(sim.env(proxy.url))
        record["upload"] = _upload(args, sim, proxy.url, staging)
        record["upload"]["killed"] = _killed_upload(sim, env, staging)
    killed = record["upload"]["killed"]
    record["acceptance"] = {  # each figure with its bound: at most (<=) or at least (>=)
        "first_batch_cold": {"ratio": record["first_batch"]["cold"]["ratio"], "at_most": 0.3},
        "first_batch_warm": {"ratio": record["first_batch"]["warm"]["ratio"], "at_most": 0.3},
        "steady_vs_local": {"ratio": record["steady"]["ratio"], "at_least": 0.95},
        "steady_per_cpu_s_vs_local": {"ratio": record["steady"]["per_cpu_s"]["ratio"], "at_least": 0.95},
        "reader_share_w8": {"value": record["readers_w8"]["max_share"], "at_most": 0.2},
        "upload_vs_s3fs_put": {"ratio": record["upload"]["speed_ratio"], "at_least": 0.8},
        "killed_upload_recorded_sent_again": {"value": killed["recorded_sent_again"] + (not killed["whole"]),
                                              "at_most": 0}}
    for entry in record["acceptance"].values():
        value = entry.get("ratio", entry.get("value"))
        entry["ok"] = value <= entry["at_most"] if "at_most" in entry else value >= entry["at_least"]
    harness.write_result(NAME, args, record, work)
    say(f"acceptance {orjson.dumps(record['acceptance']).decode()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

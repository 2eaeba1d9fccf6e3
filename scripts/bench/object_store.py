"""Object-store sources and bootstrap targets against moto's S3 server (tests/s3sim) behind a 50 ms round trip
(tests/hubsim's RttProxy), every contender in the same run, figures as ratios:

- first batch (8 x 1024 GPT-2 tokens, a fresh interpreter each): fwe over s3:// parquet against the peer a user
  would write, `datasets.load_dataset("parquet", data_files="s3://...", streaming=True, storage_options=...)` and
  tokenizers; cold (a fresh cache) and warm (the same cache again: fwe keeps the footers);
- steady tokens/s over s3:// against the same files on local disk (fwe both: the tokenizer's bound);
- each of W = 8 readers' bytes and requests per epoch, against the whole (ideal 1/8);
- a bootstrap's upload (bootstrap.bucket: multipart pieces, 8 in flight) against s3fs's `put` of the same files with
  the same concurrency (what `aws s3 sync` does); then the upload resumed after it was stopped half way.

    python -m scripts.bench.object_store [--mb 48] [--reps 3] [--out artifacts/bench]
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
import uuid

import orjson

from scripts.bench import harness
from scripts.bench.harness import say

NAME = "object_store"
SHAPE = {"seq_len": 1024, "batch_size": 8}


def _child(kind: str, url: str, tokenizer: str, steady: int, readers: int, reader: int) -> dict:
    """One measured run in this (fresh) process: seconds to the first batch, then `steady` batches' tokens/s, the
    bytes and requests the store served."""
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
                            **SHAPE)
    with FineWebLoader(config) as loader:
        batches = iter(loader)
        next(batches)
        first = time.perf_counter() - started
        t0, taken = time.perf_counter(), 0
        for _ in batches:
            taken += 1
            if taken == steady:
                break
        seconds = time.perf_counter() - t0
        source = loader.stats()["source"]
    return {"first_batch_s": first, "tokens_per_s": taken * SHAPE["seq_len"] * SHAPE["batch_size"] / seconds
            if taken else None, "object_store": source.get("object_store")}


def _parquet_files(directory: str, mb: float, files: int) -> list[str]:
    """`files` parquet files of about mb/files MB of FineWeb-like records (scripts.bench.corpus), in at least 16 row
    groups each (FineWeb-Edu's files hold ~700 of 1,000 rows: a reader's share is many row groups)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scripts.bench.corpus import build_corpus, read_texts

    texts = read_texts(build_corpus(os.path.join(directory, "corpus"), mb)[0])
    names, per = [], -(-len(texts) // files)
    for i in range(files):
        part = texts[i * per:(i + 1) * per]
        name = f"train-{i:05d}.parquet"
        pq.write_table(pa.table({"text": part, "id": [f"doc{i}-{j}" for j in range(len(part))]}),
                       os.path.join(directory, name), row_group_size=max(20, min(1000, per // 16)))
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


def _upload(args, sim, endpoint, staging) -> dict:
    """bootstrap.bucket's upload against s3fs put of the same files, same concurrency; then a resumed upload."""
    import s3fs

    from fwe_cli.bootstrap.bucket import UPLOADS, Upload, upload_bootstrap

    manifest = orjson.loads(open(os.path.join(staging, "manifest.json"), "rb").read())
    ours, peers = [], []
    for rep in range(args.reps):
        bucket = f"up-{uuid.uuid4().hex[:10]}"
        sim.bucket(bucket)
        for kind in harness.rotation(["fwe", "s3fs"], rep):
            t0 = time.perf_counter()
            if kind == "fwe":
                os.remove(os.path.join(staging, "upload.json")) if os.path.exists(
                    os.path.join(staging, "upload.json")) else None
                upload_bootstrap(staging, f"s3://{bucket}/fwe")
                ours.append(time.perf_counter() - t0)
            else:
                fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
                fs.put([os.path.join(staging, e["name"]) for e in manifest["files"]],
                       [f"{bucket}/s3fs/{e['name']}" for e in manifest["files"]], batch_size=UPLOADS)
                peers.append(time.perf_counter() - t0)
    os.remove(os.path.join(staging, "upload.json"))
    bucket = f"up-{uuid.uuid4().hex[:10]}"
    sim.bucket(bucket)
    stopped = Upload(staging, f"s3://{bucket}/r")
    jobs = [job for entry in manifest["files"] for job in stopped._jobs(entry)]
    for job in jobs[:len(jobs) // 2]:  # half the pieces sent, then the run "dies"
        job()
    resumed = Upload(staging, f"s3://{bucket}/r").run(manifest)
    fwe, peer = harness.median(ours, 3), harness.median(peers, 3)
    say(f"upload: fwe {fwe:.2f} s, s3fs put {peer:.2f} s (speed {peer / fwe:.2f}x); resumed: "
        f"{resumed['pieces_sent']} of {len(jobs)} pieces sent again")
    return {"fwe_s": ours, "s3fs_put_s": peers, "speed_ratio": round(peer / fwe, 3),
            "resume": {"pieces": len(jobs), "sent_before_stop": len(jobs) // 2,
                       "sent_on_resume": resumed["pieces_sent"]}}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--mb", type=float, default=48, help="MB of text in the bucket (default 48)")
    parser.add_argument("--files", type=int, default=4, help="parquet files (default 4)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each contender (default 3)")
    parser.add_argument("--rtt-ms", type=float, default=50, help="round trip to the store (default 50)")
    parser.add_argument("--steady", type=int, default=40, help="batches timed after the first (default 40)")
    parser.add_argument("--child", nargs=6, help=argparse_hidden())
    return parser


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv) if argv and "--child" in argv else harness.parse(parser(), argv)
    if args.child:
        kind, url, tokenizer, steady, readers, reader = args.child
        print(orjson.dumps(_child(kind, url, tokenizer, int(steady), int(readers), int(reader))).decode())
        return 0
    from scripts.bench.corpus import gpt2_tokenizer
    from tests.hubsim.proxy import RttProxy
    from tests.s3sim.server import S3Sim

    from fwe_cli.bootstrap.config import bootstrap_config
    from fwe_cli.bootstrap.run import run_bootstrap

    work = tempfile.mkdtemp(prefix="fwe-bench-s3-")
    tokenizer = gpt2_tokenizer(work)
    files = _parquet_files(work, args.mb, args.files)
    with S3Sim() as sim, RttProxy(tuple(sim.moto_address), rtt_s=args.rtt_ms / 1000) as proxy:
        bucket = f"bench-{uuid.uuid4().hex[:10]}"
        sim.bucket(bucket)
        for name in files:
            sim.client.upload_file(os.path.join(work, name), bucket, f"data/{name}")
        env = harness.child_env(**sim.env(proxy.url))
        url, cache = f"s3://{bucket}/data", tempfile.mkdtemp(prefix="fwe-warm-")
        total = sum(os.path.getsize(os.path.join(work, name)) for name in files)
        record: dict = {"mb": args.mb, "rtt_ms": args.rtt_ms, "object_bytes": total}
        record["first_batch"] = _first_batches(args, env, url, tokenizer, files, cache)
        steady = {}
        for kind, where in (("s3", url), ("local", work)):
            cmd = [sys.executable, "-m", "scripts.bench.object_store", "--child", "fwe", where, tokenizer,
                   str(args.steady), "1", "0"]
            steady[kind] = harness.run_json(cmd, f"steady {kind}", env=dict(env, HF_HOME=cache))["tokens_per_s"]
        record["steady"] = dict(steady, ratio=round(steady["s3"] / steady["local"], 3))
        say(f"steady: s3 {steady['s3']:.0f} tokens/s, local {steady['local']:.0f} ({record['steady']['ratio']}x)")
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
    record["acceptance"] = {
        "first_batch_cold": {"ratio": record["first_batch"]["cold"]["ratio"], "target": 0.3},
        "first_batch_warm": {"ratio": record["first_batch"]["warm"]["ratio"], "target": 0.3},
        "steady_vs_local": {"ratio": record["steady"]["ratio"], "target": 0.95},
        "reader_share_w8": {"value": record["readers_w8"]["max_share"], "target": 0.2},
        "upload_vs_s3fs_put": {"ratio": record["upload"]["speed_ratio"], "target": 0.8}}
    for entry in record["acceptance"].values():
        value = entry.get("ratio", entry.get("value"))
        entry["ok"] = value <= entry["target"] if entry["target"] in (0.3, 0.2) else value >= entry["target"]
    harness.write_result(NAME, args, record, work)
    say(f"acceptance {orjson.dumps(record['acceptance']).decode()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

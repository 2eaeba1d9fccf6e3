#!/usr/bin/env python3
"""Benchmark: the loader on a token directory (pre-tokenized shards) against the tokenizer ceiling on the same text.

One run: a JSONL corpus of FineWeb-like text (../shared/fineweb_real replicated when present, synthetic records
otherwise; scripts/bench_throughput.build_corpus), tokenized once with GPT-2 (tiktoken, proven identical; the
tokenizer.json built offline) into a token directory (llm.c shards + document index + manifest, fwe_cli.loader.
sources.token_shards), then
  (1) ceiling     the fastest backend encoding the same documents from pre-read text, all cores, no loader (best of
                  tiktoken on a thread pool at doc batch 256/1024 and tiktoken's encode_batch; best of --rounds)
  (2) token path  FineWebLoader over the token directory, seq_len 1024, batch 8, defaults: steady tokens/s
                  (batches at 10-90 % of the run; --epochs passes so the run is long enough to time)
  (3) first batch a fresh interpreter opening the token directory from a warm page cache: the loader's
                  first_batch_s and the process's time to its first batch (imports included)
The token path's first batches must equal the ceiling's id stream (crc32). Target: token path >= 20 x ceiling.

    python scripts/bench_token_path.py [--min-mb 150] [--rounds 3] [--epochs 3] [--out artifacts/bench]

Writes artifacts/bench/token_path_<UTC>.json; a summary goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import numpy as np  # noqa: E402
import orjson  # noqa: E402

from bench_throughput import build_corpus, say  # noqa: E402
from bench_throughput_stages import PREFIX_BATCHES, consume  # noqa: E402
from fwe_cli.artifacts import utc_stamp, write_json  # noqa: E402
from fwe_cli.hostinfo import host_facts, package_versions  # noqa: E402
from fwe_cli.loader.tokenization.gpt2_vocab import write_gpt2_tokenizer_json  # noqa: E402
from fwe_cli.loader.sources.token_shards import encode_shard, index_path, version_for  # noqa: E402

TARGET_RATIO = 20.0
SEQ_LEN, BATCH = 1024, 8
SHARD_TOKENS = 10_000_000

FIRST_BATCH_CODE = """
import sys, time
t0 = time.perf_counter()
from fwe_cli.loader import FineWebLoader, resolve_config
config = resolve_config(env={}, local_path=sys.argv[1], seq_len=%d, batch_size=%d)
with FineWebLoader(config) as loader:
    loader.next_batch()
    print(loader.first_batch_s, time.perf_counter() - t0)
""" % (SEQ_LEN, BATCH)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def ceiling(tokenizer, texts: list[str]) -> tuple[dict, list[np.ndarray]]:
    """The fastest of the candidates on pre-read text: {name: tokens/s}, and the id stream (ids + eos per doc)."""
    special = tokenizer.encoding.special_tokens_set

    def pool_run(doc_batch: int) -> list[np.ndarray]:
        chunks = [texts[i:i + doc_batch] for i in range(0, len(texts), doc_batch)]
        with ThreadPoolExecutor(cores()) as pool:
            return list(pool.map(tokenizer.encode_docs, chunks))

    candidates = {"tiktoken_threads_db256": lambda: pool_run(256), "tiktoken_threads_db1024": lambda: pool_run(1024),
                  "tiktoken_encode_batch": lambda: tokenizer.encoding.encode_batch(texts, num_threads=cores(),
                                                                                   allowed_special=special)}
    rates, stream = {}, None
    for name, run in candidates.items():
        t0 = time.perf_counter()
        out = run()
        wall = time.perf_counter() - t0
        tokens = sum(len(ids) for ids in out) + (len(texts) if name == "tiktoken_encode_batch" else 0)
        rates[name] = tokens / wall
        if name == "tiktoken_threads_db256":
            stream = out
    return rates, stream


def write_token_dir(out: str, stream: list[np.ndarray], tokenizer_path: str, eot: int, vocab_size: int) -> dict:
    """The id stream (chunks of ids + eos per document) as shards of ~SHARD_TOKENS tokens plus manifest.json."""
    os.makedirs(out, exist_ok=True)
    ids = np.concatenate(stream)
    ends = np.flatnonzero(ids == eot)  # GPT-2 text holds no <|endoftext|> of its own: each is a document's end
    starts = np.concatenate([[0], ends[:-1] + 1])
    shards, first = [], 0
    while first < len(starts):
        last = int(np.searchsorted(ends, ends[first] + SHARD_TOKENS))
        last = min(max(last, first + 1), len(starts))
        docs = [ids[starts[i]:ends[i]] for i in range(first, last)]
        body, offsets = encode_shard(docs, eot, vocab_size)
        name = f"fineweb_train_{len(shards):06d}.bin"
        with open(os.path.join(out, name), "wb") as handle:
            handle.write(body)
        np.save(index_path(os.path.join(out, name)), offsets)
        shards.append({"name": name, "tokens": (len(body) - 1024) // 2, "documents": len(docs),
                       "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)})
        first = last
    manifest = {"format": "fwe-tokens/1", "tokenizer": tokenizer_path, "vocab_hash": "bench", "vocab_size": vocab_size,
                "eot": eot, "version": version_for(vocab_size), "shards": shards, "complete": True}
    with open(os.path.join(out, "manifest.json"), "wb") as handle:
        handle.write(orjson.dumps(manifest))
    return manifest


def token_path(directory: str, epochs: int) -> dict:
    from fwe_cli.loader import FineWebLoader, resolve_config

    config = resolve_config(env={}, local_path=directory, seq_len=SEQ_LEN, batch_size=BATCH, epochs=epochs,
                            report_docs=0)
    t_start = time.perf_counter()
    with FineWebLoader(config) as loader:
        out = consume(iter(loader), SEQ_LEN * BATCH, t_start, 0)
        stats = loader.stats()
    out["loader"] = {k: stats[k] for k in ("tokenizer", "docs", "fetch_p50_ms", "fetch_p95_ms", "source")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--min-mb", type=float, default=150.0, help="corpus size (MB of JSONL)")
    parser.add_argument("--rounds", type=int, default=3, help="ceiling and token-path rounds (best of)")
    parser.add_argument("--epochs", type=int, default=3, help="passes of the token path per round")
    parser.add_argument("--synthetic", action="store_true", help="synthetic records even if real text is present")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "fwe_bench_token_path"))
    parser.add_argument("--out", default=os.path.join(ROOT, "artifacts", "bench"))
    args = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1")
    from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer

    corpus, kind = build_corpus(args.work, args.min_mb, args.synthetic)
    with open(corpus, "rb") as handle:
        texts = [orjson.loads(line)["text"] for line in handle]
    tok_path = os.path.join(args.work, "gpt2", "tokenizer.json")
    if not os.path.isfile(tok_path):
        write_gpt2_tokenizer_json(os.path.dirname(tok_path))
    tokenizer = load_tokenizer(tok_path, backend="tiktoken")
    say(f"corpus: {corpus} ({kind}), {len(texts)} documents; ceiling rounds ...")
    rounds, stream = [], None
    for _ in range(args.rounds):
        rates, stream = ceiling(tokenizer, texts)
        rounds.append(rates)
    best_name = max(rounds[0], key=lambda k: max(r[k] for r in rounds))
    ceiling_tps = max(r[best_name] for r in rounds)
    directory = os.path.join(args.work, "tokens")
    t0 = time.perf_counter()
    manifest = write_token_dir(directory, stream, tok_path, tokenizer.eos_id, tokenizer.vocab_size)
    write_s = time.perf_counter() - t0
    ids = np.concatenate(stream)
    say(f"token directory: {len(manifest['shards'])} shards, {len(ids)} tokens; token path rounds ...")
    runs = [token_path(directory, args.epochs) for _ in range(args.rounds)]
    best = max(runs, key=lambda r: r["steady_tokens_per_s"])
    prefix = ids[:PREFIX_BATCHES * SEQ_LEN * BATCH]
    same = zlib.crc32(prefix.astype(np.int32).tobytes()) == best["crc32_prefix"]
    env = {**os.environ, "PYTHONPATH": ROOT}
    first = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", FIRST_BATCH_CODE, directory], capture_output=True, text=True,
                              env=env, timeout=120)
        loader_s, process_s = map(float, proc.stdout.split())
        first.append({"loader_first_batch_s": loader_s, "process_to_first_batch_s": process_s})
    ratio = best["steady_tokens_per_s"] / ceiling_tps
    result = {
        "benchmark": "token_path", "corpus": {"path": corpus, "kind": kind, "documents": len(texts),
                                              "bytes": os.path.getsize(corpus), "tokens": int(len(ids))},
        "seq_len": SEQ_LEN, "batch": BATCH, "threads": cores(),
        "ceiling": {"tokens_per_s": ceiling_tps, "best": best_name, "rounds": rounds},
        "token_dir": {"shards": len(manifest["shards"]), "write_s": write_s, "version": manifest["version"]},
        "token_path": {"steady_tokens_per_s": best["steady_tokens_per_s"], "epochs": args.epochs, "runs": runs},
        "ratio": ratio, "target_ratio": TARGET_RATIO, "meets_target": ratio >= TARGET_RATIO,
        "same_ids_as_ceiling": same, "first_batch_warm": first,
        "host": host_facts(), "packages": package_versions(),
    }
    path = os.path.join(args.out, f"token_path_{utc_stamp()}.json")
    write_json(path, result)
    say(f"ceiling {ceiling_tps / 1e6:.2f} M tokens/s ({best_name}); token path "
        f"{best['steady_tokens_per_s'] / 1e6:.1f} M tokens/s: {ratio:.1f} x (target {TARGET_RATIO:g} x); same ids: "
        f"{same}; warm first batch {min(f['loader_first_batch_s'] for f in first) * 1000:.1f} ms (loader), "
        f"{min(f['process_to_first_batch_s'] for f in first) * 1000:.0f} ms (process, imports included)")
    say(f"wrote {path}")


if __name__ == "__main__":
    main()

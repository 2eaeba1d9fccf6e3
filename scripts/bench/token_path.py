"""Benchmark: the loader on a token directory (pre-tokenized shards) against the tokenizer ceiling on the same text.

One run: a JSONL corpus of FineWeb-like text (../shared/fineweb_real replicated when present, synthetic records
otherwise; scripts.bench.corpus), tokenized once with GPT-2 (the tokenizer.json built offline) into a token
directory by fwe's own tokenize run (fwe_cli.tokens.run.run_tokenize: llm.c shards of at most 10 M tokens +
document index + manifest; `token_dir.write_s` is that run's time), then
  (1) ceiling     the fastest backend encoding the same documents from pre-read text, all cores, no loader (best of
                  tiktoken on a thread pool at doc batch 256/1024 and tiktoken's encode_batch; best of --rounds)
  (2) token path  FineWebLoader over the token directory, seq_len 1024, batch 8, defaults: steady tokens/s
                  (batches at 10-90 % of the run; --epochs passes so the run is long enough to time)
  (3) first batch a fresh interpreter opening the token directory from a warm page cache: the loader's
                  first_batch_s and the process's time to its first batch (imports included)
The token path's first batches (256, or the whole corpus's where it holds fewer) must equal the ceiling's id stream
(crc32). Target: token path >= 20 x ceiling.

    python -m scripts.bench.token_path [--min-mb 150] [--rounds 3] [--epochs 3] [--out artifacts/bench]

Writes artifacts/bench/token_path-<UTC>.json; a summary goes to stderr.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import zlib

import numpy as np

from scripts.bench import harness
from scripts.bench.corpus import build_corpus, gpt2_tokenizer, read_texts
from scripts.bench.harness import say
from scripts.bench.throughput_stages import PREFIX_BATCHES, consume, time_ceiling

NAME = "token_path"
TARGET_RATIO = 20.0
SEQ_LEN, BATCH = 1024, 8
SHARD_TOKENS = 10_000_000
FIRST_BATCHES = 3

FIRST_BATCH_CODE = """
import sys, time
t0 = time.perf_counter()
from fwe_cli.loader import FineWebLoader, resolve_config
config = resolve_config(env={}, local_path=sys.argv[1], seq_len=%d, batch_size=%d)
with FineWebLoader(config) as loader:
    loader.next_batch()
    print(loader.first_batch_s, time.perf_counter() - t0)
""" % (SEQ_LEN, BATCH)


def tokenize(corpus: str, tokenizer: str, directory: str) -> tuple[dict, float]:
    """`corpus` tokenized afresh into `directory` by fwe's tokenize run: (its result, seconds)."""
    from fwe_cli.tokens.run import TokenizeConfig, run_tokenize

    shutil.rmtree(directory, ignore_errors=True)
    t0 = time.perf_counter()
    result = run_tokenize(TokenizeConfig(src=corpus, out=directory, tokenizer=tokenizer, shard_tokens=SHARD_TOKENS))
    return result, time.perf_counter() - t0


def token_path(directory: str, epochs: int, prefix_batches: int) -> dict:
    from fwe_cli.loader import FineWebLoader, resolve_config

    config = resolve_config(env={}, local_path=directory, seq_len=SEQ_LEN, batch_size=BATCH, epochs=epochs,
                            report_docs=0)
    t_start = time.perf_counter()
    with FineWebLoader(config) as loader:
        out = consume(iter(loader), SEQ_LEN * BATCH, t_start, 0, prefix_batches=prefix_batches)
        stats = loader.stats()
    out["loader"] = {k: stats[k] for k in ("tokenizer", "docs", "fetch_p50_ms", "fetch_p95_ms", "source")}
    return out


def first_batch(directory: str) -> dict:
    """A fresh interpreter's first batch from the token directory: the loader's figure and the process's."""
    _, proc = harness.run_timed([sys.executable, "-c", FIRST_BATCH_CODE, directory], timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"first batch from {directory} failed: {harness.failure_line(proc)}")
    loader_s, process_s = map(float, proc.stdout.split())
    return {"loader_first_batch_s": loader_s, "process_to_first_batch_s": process_s}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--min-mb", type=float, default=150.0, help="corpus size (MB of JSONL)")
    parser.add_argument("--rounds", type=int, default=3, help="ceiling and token-path rounds (best of)")
    parser.add_argument("--epochs", type=int, default=3, help="passes of the token path per round")
    parser.add_argument("--synthetic", action="store_true", help="synthetic records even if real text is present")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "fwe_bench_token_path"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    from fwe_cli.hostinfo import usable_cores

    os.environ.update(HF_HUB_OFFLINE="1")
    corpus, kind = build_corpus(args.work, args.min_mb, args.synthetic)
    texts = read_texts(corpus)
    tok_path = gpt2_tokenizer(os.path.join(args.work, "gpt2"))
    say(f"corpus: {corpus} ({kind}), {len(texts)} documents; ceiling rounds ...")
    rounds, stream = [], None
    for _ in range(args.rounds):
        results, stream = time_ceiling(tok_path, texts)
        rounds.append({name: result["tokens_per_s"] for name, result in results.items()})
    best_name = max(rounds[0], key=lambda k: max(r[k] for r in rounds))
    ceiling_tps = max(r[best_name] for r in rounds)
    directory = os.path.join(args.work, "tokens")
    made, write_s = tokenize(corpus, tok_path, directory)
    say(f"token directory: {made['shards']} shards, {made['tokens']} tokens; token path rounds ...")
    compared = min(PREFIX_BATCHES, len(stream) // (SEQ_LEN * BATCH))  # batches of one pass, not of the next epoch
    runs = [token_path(directory, args.epochs, compared) for _ in range(args.rounds)]
    best = max(runs, key=lambda r: r["steady_tokens_per_s"])
    prefix = stream[:compared * SEQ_LEN * BATCH]
    same = zlib.crc32(prefix.astype(np.int32).tobytes()) == best["crc32_prefix"]
    first = [first_batch(directory) for _ in range(FIRST_BATCHES)]
    ratio = best["steady_tokens_per_s"] / ceiling_tps
    harness.write_result(NAME, args, {
        "benchmark": "token_path", "corpus": {"path": corpus, "kind": kind, "documents": len(texts),
                                              "bytes": os.path.getsize(corpus), "tokens": int(len(stream))},
        "seq_len": SEQ_LEN, "batch": BATCH, "threads": usable_cores(),
        "ceiling": {"tokens_per_s": ceiling_tps, "best": best_name, "rounds": rounds},
        "token_dir": {"shards": made["shards"], "write_s": write_s, "version": made["manifest"]["version"],
                      "tokens": made["tokens"], "encoded_by_backend": made["encoded_by_backend"]},
        "token_path": {"steady_tokens_per_s": best["steady_tokens_per_s"], "epochs": args.epochs, "runs": runs},
        "ratio": ratio, "target_ratio": TARGET_RATIO, "meets_target": ratio >= TARGET_RATIO,
        "same_ids_as_ceiling": same, "compared_batches": compared, "first_batch_warm": first}, args.work)
    say(f"ceiling {ceiling_tps / 1e6:.2f} M tokens/s ({best_name}); token path "
        f"{best['steady_tokens_per_s'] / 1e6:.1f} M tokens/s: {ratio:.1f} x (target {TARGET_RATIO:g} x); same ids: "
        f"{same}; warm first batch {min(f['loader_first_batch_s'] for f in first) * 1000:.1f} ms (loader), "
        f"{min(f['process_to_first_batch_s'] for f in first) * 1000:.0f} ms (process, imports included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

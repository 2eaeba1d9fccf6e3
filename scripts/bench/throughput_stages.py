"""The measured stages of scripts.bench.throughput; each runs in a fresh interpreter and prints one JSON line.

    python -m scripts.bench.throughput_stages STAGE --data FILE.jsonl --tokenizer tokenizer.json [--seq-len 1024]
        [--batch 8] [--max-seconds 0] [--queue 8]

Stages: naive | datasets | ceiling | fwe | rss. A fresh process per stage means no fork ever follows a tokenizer's
thread pool (the DataLoader worker forks a parent that has not tokenized), nothing is shared through caches, and
peak RSS belongs to one stage. Every loader stage counts the tokens of whole [batch, seq_len] batches, times
each fetch, and hashes its stream (crc32 of the int32 ids of the first PREFIX_BATCHES batches and of all of them),
so the parent can check that all stages produced the same ids.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import numpy as np
import orjson

EOT = "<|endoftext|>"
PREFIX_BATCHES = 256  # 2.1 M tokens at seq 1024 x batch 8: covers fwe's tokenizers-then-tiktoken handover
WINDOW = (0.1, 0.9)  # steady state: the rate between the batches at 10 % and 90 % of the run ...
SETTLE_BATCHES = 32  # ... starting no sooner than this many batches after fwe switched backend: the tasks in flight
# then (2 x threads x doc_batch documents, ~180 k tokens) and the queue (8 batches) still hold tokenizers' output


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def consume(batches: Iterator, batch_tokens: int, t_start: float, max_seconds: float,
            settled: Callable[[], bool] = lambda: True, prefix_batches: int = PREFIX_BATCHES) -> dict:
    """Pull batches until the end (or max_seconds); time each fetch; hash the stream.

    Steady state is the stretch from the batch at 10 % of the run (or, if later, SETTLE_BATCHES after the first
    batch at which `settled()` held: fwe's switch to its proven fast backend) to the batch at 90 %. A run too
    short to settle is measured over 10-90 % and says so (after_settling false)."""
    stamps, cpus, fetch, crc_prefix, crc, settled_at = [], [], [], 0, 0, None
    c0 = cpu_s()
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            complete = True
            break
        t1 = time.perf_counter()
        fetch.append(t1 - t0)
        stamps.append(t1)
        cpus.append(cpu_s())
        if settled_at is None and settled():
            settled_at = len(stamps) - 1
        data = np.ascontiguousarray(np.asarray(batch), dtype=np.int32).tobytes()
        crc = zlib.crc32(data, crc)
        if len(stamps) <= prefix_batches:
            crc_prefix = crc
        if max_seconds and t1 - t_start > max_seconds:
            complete = False
            break
    n = len(stamps)
    k1, k2 = int(n * WINDOW[0]), int(n * WINDOW[1]) - 1
    settled_window = settled_at is not None and k2 - max(k1, settled_at + SETTLE_BATCHES) >= 20
    if settled_window:
        k1 = max(k1, settled_at + SETTLE_BATCHES)
    if k2 - k1 < 20:
        raise SystemExit(f"{n} batches: too few for a steady-state window (use more data)")
    fetch_ms = np.asarray(fetch) * 1000
    end = stamps[-1]
    return {
        "batches": n, "tokens": n * batch_tokens, "complete": complete,
        "steady_tokens_per_s": (k2 - k1) * batch_tokens / (stamps[k2] - stamps[k1]),
        "steady_tokens_per_cpu_s": (k2 - k1) * batch_tokens / max(cpus[k2] - cpus[k1], 1e-9),
        "steady_window": {"from_batch": k1, "to_batch": k2, "settled_at_batch": settled_at,
                          "after_settling": settled_window,
                          "from_s": stamps[k1] - t_start, "to_s": stamps[k2] - t_start},
        "end_to_end_tokens_per_s": n * batch_tokens / (end - t_start),
        "first_batch_s": stamps[0] - t_start, "wall_s": end - t_start,
        "fetch_p50_ms": float(np.percentile(fetch_ms, 50)), "fetch_p95_ms": float(np.percentile(fetch_ms, 95)),
        "fetch_max_ms": float(fetch_ms.max()), "fetch_max_at_batch": int(fetch_ms.argmax()), "cpu_s": cpu_s() - c0,
        "crc32_prefix": crc_prefix if n >= prefix_batches else None, "crc32": crc if complete else None,
    }


def rows_to_batches(ids_iter: Iterator[list[int]], seq_len: int, batch: int) -> Iterator[np.ndarray]:
    """A Python-list token buffer cut into batches: what hand-written training loops do."""
    need = seq_len * batch
    buf: list[int] = []
    for ids in ids_iter:
        buf.extend(ids)
        while len(buf) >= need:
            out = np.array(buf[:need], dtype=np.int32).reshape(batch, seq_len)
            del buf[:need]
            yield out


def stage_naive(args) -> dict:
    """One document at a time: json.loads, tokenizers encode(), ids into a list (the users' current loader)."""
    import json

    t_start = time.perf_counter()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    eos = tok.token_to_id(EOT)

    def docs() -> Iterator[list[int]]:
        with open(args.data, encoding="utf-8") as handle:
            for line in handle:
                yield tok.encode(json.loads(line)["text"]).ids + [eos]

    return consume(rows_to_batches(docs(), args.seq_len, args.batch), args.seq_len * args.batch, t_start,
                   args.max_seconds)


def stage_datasets(args) -> dict:
    """datasets streaming JSONL + batched map (tokenizers encode_batch) + packing + torch DataLoader(num_workers=1)."""
    t_start = time.perf_counter()
    import torch
    from datasets import load_dataset
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    eos = tok.token_to_id(EOT)
    with open(args.data, "rb") as handle:
        columns = list(orjson.loads(handle.readline()))
    stream = load_dataset("json", data_files=args.data, split="train", streaming=True)
    stream = stream.map(lambda b: {"input_ids": [e.ids + [eos] for e in tok.encode_batch(b["text"])]},
                        batched=True, batch_size=1000, remove_columns=columns)
    seq_len = args.seq_len

    class Packed(torch.utils.data.IterableDataset):
        def __iter__(self):
            buf: list[int] = []
            for example in stream:
                buf.extend(example["input_ids"])
                while len(buf) >= seq_len:
                    yield torch.tensor(buf[:seq_len], dtype=torch.int32)
                    del buf[:seq_len]

    loader = torch.utils.data.DataLoader(Packed(), batch_size=args.batch, num_workers=1, drop_last=True)
    out = consume(iter(loader), args.seq_len * args.batch, t_start, args.max_seconds)
    out["versions"] = {"torch": torch.__version__}
    return out


def time_ceiling(tokenizer_path: str, texts: list[str], all_candidates: bool = False) -> tuple[dict, np.ndarray]:
    """The tokenizer ceiling on pre-read text, all cores, no I/O, no packing: fwe's proven tiktoken backend on a
    thread pool (doc batches 256/1024) and tiktoken's own encode_batch (with `all_candidates`, also doc batch 64
    and tokenizers' encode_batch, to show they are slower). Token counts include one end-of-document id per
    document, as in every loader. Returns ({candidate: tokens_per_s, wall_s, cpu_s, tokens}, the id stream of
    the doc batch 256 run: ids + eos per document)."""
    from fwe_cli.hostinfo import usable_cores
    from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer

    cores = usable_cores()
    fast = load_tokenizer(tokenizer_path, backend="tiktoken")
    special = fast.encoding.special_tokens_set

    def pool_run(tokenizer, doc_batch: int):
        chunks = [texts[i : i + doc_batch] for i in range(0, len(texts), doc_batch)]
        with ThreadPoolExecutor(cores) as pool:
            return list(pool.map(tokenizer.encode_docs, chunks))

    candidates = {
        "tiktoken_threads_db256": lambda: pool_run(fast, 256),
        "tiktoken_threads_db1024": lambda: pool_run(fast, 1024),
        "tiktoken_encode_batch": lambda: fast.encoding.encode_batch(texts, num_threads=cores, allowed_special=special),
    }
    if all_candidates:  # slower ones, to show they are slower (tokenizers encode_batch: ~1 M tokens/s on 2 cores)
        hf = load_tokenizer(tokenizer_path, backend="tokenizers")
        candidates["tiktoken_threads_db64"] = lambda: pool_run(fast, 64)
        candidates["tokenizers_encode_batch_db1000"] = lambda: [
            hf.tokenizer.encode_batch(texts[i : i + 1000], add_special_tokens=False) for i in range(0, len(texts), 1000)]
    results, stream = {}, None
    for name, run in candidates.items():
        c0, t0 = cpu_s(), time.perf_counter()
        out = run()
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
        if name.startswith("tokenizers"):
            out = [enc for chunk in out for enc in chunk]
        tokens = sum(len(ids) for ids in out) + (len(texts) if not name.startswith("tiktoken_threads") else 0)
        results[name] = {"tokens_per_s": tokens / wall, "wall_s": wall, "cpu_s": cpu, "tokens": tokens}
        if name == "tiktoken_threads_db256":
            stream = np.concatenate(out)
    return results, stream


def stage_ceiling(args) -> dict:
    """The fastest tokenizer giving the right ids (time_ceiling's best candidate), and its stream's hashes."""
    from fwe_cli.hostinfo import usable_cores
    from scripts.bench.corpus import read_texts

    texts = read_texts(args.data)
    results, stream = time_ceiling(args.tokenizer, texts, args.all_candidates)
    best = max(results, key=lambda k: results[k]["tokens_per_s"])
    batch_tokens = args.seq_len * args.batch
    whole = len(stream) // batch_tokens * batch_tokens
    return {"tokens_per_s": results[best]["tokens_per_s"], "best": best, "candidates": results,
            "threads": usable_cores(), "docs": len(texts), "tokens": int(len(stream)),
            "crc32_prefix": zlib.crc32(stream[: PREFIX_BATCHES * batch_tokens].tobytes()),
            "crc32": zlib.crc32(stream[:whole].tobytes())}


def _fwe_config(args, **overrides):
    from fwe_cli.loader import resolve_config

    settings = dict(local_path=args.data, tokenizer=args.tokenizer, seq_len=args.seq_len, batch_size=args.batch,
                    queue_depth=args.queue, report_docs=0)
    settings.update(overrides)
    return resolve_config(env={}, **settings)


def tokenizer_settled(tokenizer) -> bool:
    """The tokenizer encodes with the backend it will keep (an upgrading tokenizer's tiktoken proof has ended)."""
    return tokenizer is not None and getattr(tokenizer, "check_s", 0) is not None


def stage_fwe(args) -> dict:
    """FineWebLoader on the file with its defaults (backend auto, a tokenize thread per core)."""
    from fwe_cli.loader import FineWebLoader

    config = _fwe_config(args)
    t_start = time.perf_counter()
    with FineWebLoader(config) as loader:
        out = consume(iter(loader), args.seq_len * args.batch, t_start, args.max_seconds,
                      lambda: tokenizer_settled(loader.pipeline.tokenizer))
        stats = loader.stats()
    out["loader"] = {k: stats[k] for k in ("tokenizer", "tokenizer_threads", "fetch_p95_ms", "tokenize_s", "docs")}
    out["config"] = config.to_json()
    return out


def stage_rss(args) -> dict:
    """Peak RSS of a loader process at seq 2048, batch 32, Q 64: the queue is filled, then kept full by a
    consumer slower than the producer (2 ms a batch), until the file ends."""
    from fwe_cli.loader import FineWebLoader

    base = peak_rss_mb()
    config = _fwe_config(args, warmup_batches=args.queue, warmup_timeout=120.0)
    with FineWebLoader(config) as loader:
        warm = loader.warmup()
        for _batch in loader:
            time.sleep(0.002)
        stats = loader.stats()
    return {"peak_rss_mb": peak_rss_mb(), "rss_after_imports_mb": base, "warmup": warm,
            "mean_queue_fill": stats["mean_queue_fill"], "batches": stats["steps"],
            "backend": stats["tokenizer"]["backend"], "seq_len": args.seq_len, "batch": args.batch,
            "queue_depth": args.queue}


STAGES = {"naive": stage_naive, "datasets": stage_datasets, "ceiling": stage_ceiling, "fwe": stage_fwe,
          "rss": stage_rss}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.throughput_stages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=sorted(STAGES))
    parser.add_argument("--data", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--queue", type=int, default=8)
    parser.add_argument("--all-candidates", action="store_true", help="ceiling: also time the slower tokenizers")
    parser.add_argument("--max-seconds", type=float, default=0.0, help="stop a loader stage after this long (0: never)")
    args = parser.parse_args(argv)
    result = STAGES[args.stage](args)
    result.update(stage=args.stage, peak_rss_mb=peak_rss_mb())
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

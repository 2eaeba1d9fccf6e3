"""Benchmark on a CUDA GPU: a small GPT trained for a few hundred steps, fed by
  (a) text     fwe's FineWebLoader on JSONL text (GPT-2, tokenized on the fly)
  (b) tokens   fwe's FineWebLoader on a token directory of the same text (pre-tokenized llm.c shards)
  (c) workers  fwe's FineWebDataset on the same text through torchdata's StatefulDataLoader(num_workers=--workers,
               pin_memory=True): how a trainer with DataLoader workers takes fwe
  (d) datasets a torch DataLoader with workers over `datasets` (local JSONL, no network), tokenizers' encode_batch
reporting per feed: training tokens/s, the data-wait (stall) fraction of the steps' wall time and the first-batch
time. Each feed runs in a fresh interpreter (its first batch includes its imports and opening; no fork follows a
tokenizer). Without a CUDA GPU (or torch) it says so in one line and exits 0.

    python -m scripts.bench.gpu [--steps 300] [--seq-len 1024] [--batch 8] [--min-mb 60] [--workers 4]
                                [--feeds text,tokens,workers,datasets] [--out artifacts/bench]

Data: as scripts.bench.token_path (../shared/fineweb_real replicated, else synthetic records); the token directory
is built once from it by fwe's own tokenize run (GPT-2's tokenizer.json built offline) and reused.
Writes artifacts/bench/gpu-<UTC>.json; a summary goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from scripts.bench import harness
from scripts.bench.harness import say

NAME = "gpu"
FEEDS = ("text", "tokens", "workers", "datasets")
WARMUP_STEPS = 10  # excluded from the steady figures (CUDA kernels' first launches, allocator growth)


def gpu_missing() -> str | None:
    """Why there is nothing to measure here, or None when a CUDA GPU is usable."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    return None


def gpt(vocab: int, seq_len: int, dim: int = 384, layers: int = 6, heads: int = 6):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=True)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq_len, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.head = nn.Linear(dim, vocab, bias=False)

        def forward(self, ids):
            t = ids.shape[1]
            mask = torch.nn.Transformer.generate_square_subsequent_mask(t, device=ids.device)
            x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
            for block in self.blocks:
                x = block(x, mask)
            return self.head(x)

    return GPT()


def feed_batches(feed: str, args):
    """An iterator of [batch, seq_len] int tensors (CPU) for `feed`."""
    if feed in ("text", "tokens"):
        from fwe_cli.loader import FineWebLoader, resolve_config

        path = args.corpus if feed == "text" else args.token_dir
        config = resolve_config(env={}, local_path=path, tokenizer=args.tokenizer, seq_len=args.seq_len,
                                batch_size=args.batch, as_torch=True, epochs=100, report_docs=0)
        return iter(FineWebLoader(config))
    if feed == "workers":
        from torchdata.stateful_dataloader import StatefulDataLoader

        from fwe_cli.loader import FineWebDataset, resolve_config

        config = resolve_config(env={}, local_path=args.corpus, tokenizer=args.tokenizer, seq_len=args.seq_len,
                                batch_size=args.batch, epochs=100, report_docs=0)
        return iter(StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=args.workers,
                                       pin_memory=True, persistent_workers=True))
    import datasets
    import numpy as np
    import torch
    from tokenizers import Tokenizer

    table = datasets.load_dataset("json", data_files=args.corpus, split="train")  # once, before the workers fork

    class Packed(torch.utils.data.IterableDataset):
        def __iter__(self):
            info, rows = torch.utils.data.get_worker_info(), table
            if info is not None:
                rows = rows.shard(num_shards=info.num_workers, index=info.id)
            tok = Tokenizer.from_file(args.tokenizer)
            eos, need, buf = tok.token_to_id("<|endoftext|>"), args.seq_len, []
            while True:
                for first in range(0, len(rows), 256):
                    for enc in tok.encode_batch(rows[first:first + 256]["text"], add_special_tokens=False):
                        buf += enc.ids + [eos]
                    while len(buf) >= need:
                        yield torch.from_numpy(np.asarray(buf[:need], dtype=np.int64))
                        del buf[:need]

    return iter(torch.utils.data.DataLoader(Packed(), batch_size=args.batch, num_workers=args.workers,
                                            pin_memory=True, persistent_workers=True))


def train(feed: str, args) -> dict:
    """`args.steps` optimizer steps fed by `feed`: wall time, time waiting on data, first batch."""
    import torch

    torch.manual_seed(0)
    model = gpt(50304, args.seq_len).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    t_start = time.perf_counter()
    batches = feed_batches(feed, args)
    waits, steps_s, first = [], [], None
    for step in range(args.steps):
        t0 = time.perf_counter()
        batch = next(batches).to("cuda", non_blocking=True).long()
        t1 = time.perf_counter()
        first = t1 - t_start if first is None else first
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()  # the step's GPU work is in its time: the wait is what the GPU did not overlap
        waits.append(t1 - t0)
        steps_s.append(time.perf_counter() - t0)
    steady = slice(WARMUP_STEPS, None)
    wall = sum(steps_s[steady])
    tokens = (args.steps - WARMUP_STEPS) * args.batch * args.seq_len
    return {"feed": feed, "steps": args.steps, "tokens_per_s": tokens / wall, "data_wait_fraction":
            sum(waits[steady]) / wall, "first_batch_s": first, "mean_step_ms": 1000 * wall / len(steps_s[steady]),
            "final_loss": float(loss), "gpu": torch.cuda.get_device_name()}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--min-mb", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=4, help="DataLoader workers of feeds (c) and (d)")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "fwe_bench_gpu"))
    parser.add_argument("--feeds", default=",".join(FEEDS), help=f"the feeds to run, of {','.join(FEEDS)}")
    parser.add_argument("--feed", choices=FEEDS, help=argparse.SUPPRESS)  # one feed, in this process (internal)
    for name in ("corpus", "token_dir", "tokenizer"):
        parser.add_argument(f"--{name.replace('_', '-')}", help=argparse.SUPPRESS)
    return parser


def token_dir(corpus: str, tokenizer: str, directory: str) -> str:
    """The token directory of `corpus`, made by fwe's tokenize run unless a complete one is there already."""
    from fwe_cli.tokens.run import TokenizeConfig, run_tokenize

    run_tokenize(TokenizeConfig(src=corpus, out=directory, tokenizer=tokenizer, shard_tokens=10_000_000))
    return directory


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    unknown = sorted(set(args.feeds.split(",")) - set(FEEDS))
    if unknown:
        parser().error(f"--feeds {args.feeds}: no feed {', '.join(unknown)} (the feeds: {', '.join(FEEDS)})")
    missing = gpu_missing()
    if missing:
        say(f"scripts.bench.gpu: no CUDA GPU here ({missing}); nothing measured")
        return 0
    import orjson

    if args.feed:
        print(orjson.dumps(train(args.feed, args)).decode())
        return 0
    from scripts.bench.corpus import build_corpus, gpt2_tokenizer

    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    corpus, kind = build_corpus(args.work, args.min_mb)
    tok_path = gpt2_tokenizer(os.path.join(args.work, "gpt2"))
    tokens = token_dir(corpus, tok_path, os.path.join(args.work, "tokens"))
    feeds = {}
    for feed in args.feeds.split(","):
        say(f"feed {feed} ...")
        _, proc = harness.run_timed([sys.executable, "-m", "scripts.bench.gpu", "--feed", feed, "--corpus", corpus,
                                     "--token-dir", tokens, "--tokenizer", tok_path, "--steps", str(args.steps),
                                     "--seq-len", str(args.seq_len), "--batch", str(args.batch), "--workers",
                                     str(args.workers), "--out", args.out], timeout=1800)
        feeds[feed] = orjson.loads(proc.stdout.splitlines()[-1]) if proc.returncode == 0 else {
            "error": harness.failure_line(proc), "returncode": proc.returncode}
        say(f"  {feeds[feed]}")
    harness.write_result(NAME, args, {
        "benchmark": "gpu_feeds", "corpus": {"path": corpus, "kind": kind}, "seq_len": args.seq_len,
        "batch": args.batch, "steps": args.steps, "workers": args.workers, "feeds": feeds}, args.work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

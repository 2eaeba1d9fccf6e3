"""A tiny data-parallel training loop for `torchrun` (tests/loader/test_ranks.py), and the decoding of byte batches.

    torchrun --standalone --nproc-per-node 2 tests/rank_train.py DATA.jsonl OUT_DIR SEQ_LEN BATCH SHUFFLE_SEED \
        [--hub] [-- FWE_ARGS...]

Each rank joins a gloo (CPU) process group and trains twice: in file order, then shuffled with SHUFFLE_SEED. Each
time it builds its loader from `resolve_config` with NO shard flags (the shard comes from torchrun's RANK and
WORLD_SIZE), takes every batch with `for batch in loader:`, makes a toy model step whose gradient is all-reduced, and
writes OUT_DIR/plain/rank{r}.json (then OUT_DIR/shuffled/rank{r}.json): the documents it saw, its shard, shard_from
and step count. Then it trains over a file whose second half holds more tokens per byte (its shares are dealt by
bytes, so rank 1 has more batches) through `fwe_cli.train.lockstep`, and writes OUT_DIR/lockstep/rank{r}.json: the
batches its share holds and the steps it took. With `--hub`, each rank then reads the Hub at HF_ENDPOINT natively with an HF_HOME of its own
(OUT_DIR/hub/hf_home_rank{r}, so that only rank 0's broadcast can spare a rank the Hub's metadata): a loader with no
shard flags takes one batch and closes, then a second one does the same (a warm start: the listing is cached), and
OUT_DIR/hub/rank{r}.json records the commit and files each read and its batch's documents. With `-- FWE_ARGS`, each
rank then runs `python -m fwe_cli FWE_ARGS` as a child process with the environment torchrun gave the rank (what
`torchrun -m fwe_cli FWE_ARGS` gives each of its processes) and writes its exit code and stderr to
OUT_DIR/fwe_rank{r}.json. One job for all of them: a torchrun costs seconds of imports in every rank.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Iterable

import numpy as np

BYTE_EOS_ID = 256  # the byte tokenizer's end-of-document id; ids below it are UTF-8 bytes


def decode_documents(batches: Iterable[np.ndarray], complete_only: bool = False) -> list[str]:
    """The documents in byte-tokenizer batches taken in order from the start of a stream: the batches' tokens are
    joined first (a document may span batches), then split at the end-of-document id. The piece after the last
    separator is an unfinished document: kept unless `complete_only`."""
    stream = np.concatenate([np.asarray(b, dtype=np.int64).reshape(-1) for b in batches])
    ends = np.flatnonzero(stream == BYTE_EOS_ID)
    pieces = np.split(stream, ends)  # each piece after the first starts with its separator
    docs = [bytes(p[p != BYTE_EOS_ID].astype(np.uint8)).decode("utf-8") for p in pieces]
    if complete_only or not docs[-1]:
        docs = docs[:-1]
    return docs


def main(data: str, out_dir: str, seq_len: int, batch_size: int, shuffle_seed: int, hub: bool,
         fwe_args: list[str]) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))  # a rank stepping alone fails, not hangs
    for name, seed in (("plain", None), ("shuffled", shuffle_seed)):
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        train(dist, data, os.path.join(out_dir, name), seq_len, batch_size, seed)
    train_in_lockstep(dist, os.path.join(out_dir, "lockstep"), seq_len, batch_size)
    if hub:
        read_hub_twice(dist.get_rank(), os.path.join(out_dir, "hub"))
    if fwe_args:
        proc = subprocess.run([sys.executable, "-m", "fwe_cli", *fwe_args], capture_output=True, text=True,
                              timeout=120)
        with open(os.path.join(out_dir, f"fwe_rank{dist.get_rank()}.json"), "w", encoding="utf-8") as handle:
            json.dump({"returncode": proc.returncode, "stderr": proc.stderr[-3000:]}, handle)
    end_rank(dist)


def train(dist, data: str, out_dir: str, seq_len: int, batch_size: int, shuffle_seed: int | None) -> None:
    """One pass of the training loop over the rank's shard; its report goes to OUT_DIR/rank{r}.json."""
    import torch

    from fwe_cli.loader import FineWebLoader, resolve_config

    rank, world = dist.get_rank(), dist.get_world_size()
    config = resolve_config(source="local", local_path=data, tokenizer="byte", seq_len=seq_len,
                            batch_size=batch_size, heartbeat_dir=out_dir, loader_timeout=120.0,
                            shuffle_seed=shuffle_seed, shuffle_window=16)
    torch.manual_seed(0)
    model = torch.nn.Embedding(BYTE_EOS_ID + 1, 4)  # the same start on every rank
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches, steps = [], 0
    with FineWebLoader(config) as loader:
        for batch in loader:
            batches.append(np.array(batch))
            optimizer.zero_grad()
            model(torch.as_tensor(batches[-1], dtype=torch.long)).pow(2).mean().backward()
            for p in model.parameters():  # data parallelism by hand: average the gradient over the ranks
                dist.all_reduce(p.grad)
                p.grad /= world
            optimizer.step()
            steps += 1
    # the replicas stayed identical: every rank stepped with the same averaged gradients
    weights = model.weight.detach().clone()
    dist.all_reduce(weights, op=dist.ReduceOp.MAX)
    in_sync = bool(torch.equal(weights, model.weight.detach()))
    report = {"rank": rank, "world": world, "shard": [config.shard.mod, config.shard.rem],
              "shard_from": config.shard_from, "heartbeat_rank": config.rank, "steps": steps, "in_sync": in_sync,
              "docs": decode_documents(batches) if batches else []}
    with open(f"{out_dir}/rank{rank}.json", "w", encoding="utf-8") as handle:
        json.dump(report, handle)


def train_in_lockstep(dist, out_dir: str, seq_len: int, batch_size: int) -> None:
    """Uneven shares (the file's first half holds 2 bytes a token: newlines, escaped in JSON), trained through
    lockstep: every rank steps as often as the rank with the fewest batches, none all-reduces alone."""
    import torch

    import orjson

    from fwe_cli.loader import FineWebLoader, resolve_config
    from fwe_cli.train.lockstep import lockstep

    rank = dist.get_rank()
    os.makedirs(out_dir, exist_ok=True)
    data = os.path.join(out_dir, f"uneven_rank{rank}.jsonl")  # the same bytes on every rank, each its own copy
    with open(data, "wb") as handle:
        for i in range(64):
            handle.write(orjson.dumps({"text": ("\n" if i < 32 else "x") * 40 + f" {i}"}) + b"\n")
    config = resolve_config(source="local", local_path=data, tokenizer="byte", seq_len=seq_len,
                            batch_size=batch_size, loader_timeout=120.0)
    with FineWebLoader(config) as loader:
        available = sum(1 for _ in loader)
    weight = torch.zeros(1)
    steps = 0
    with FineWebLoader(config) as loader:
        for _batch in lockstep(loader):
            grad = torch.ones(1)
            dist.all_reduce(grad)  # what DDP's backward does: every rank must take part
            weight -= grad
            steps += 1
    with open(f"{out_dir}/rank{rank}.json", "w", encoding="utf-8") as handle:
        json.dump({"rank": rank, "available": available, "steps": steps, "weight": float(weight[0])}, handle)


def read_hub_twice(rank: int, out_dir: str) -> None:
    """Cold, then warm: a native Hub loader with no shard flags (byte tokenizer) takes one batch and closes; the
    rank's report goes to OUT_DIR/rank{r}.json. The rank's HF_HOME is its own (fwe reads it when it opens the Hub)."""
    from fwe_cli.loader import FineWebLoader, resolve_config

    home = os.path.join(out_dir, f"hf_home_rank{rank}")
    os.makedirs(home, exist_ok=True)
    os.environ.update(HF_HOME=home, HF_HUB_CACHE=os.path.join(home, "hub"))
    config = resolve_config(source="hub", tokenizer="byte", seq_len=2048, batch_size=4, loader_timeout=120.0)
    report = {"rank": rank, "shard": [config.shard.mod, config.shard.rem], "opens": []}
    for _ in ("cold", "warm"):
        with FineWebLoader(config) as loader:
            batch = np.array(loader.next_batch())
            source = loader.stats()["source"]
        report["opens"].append({"revision": source["revision"], "files": source["files"],
                                "docs": decode_documents([batch]), "complete": decode_documents([batch], True)})
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle)


def end_rank(dist) -> None:
    """Leave the job: a barrier (no rank tears the group down while another still talks to it), the group destroyed,
    then the process ended without interpreter teardown: torch's gloo transport can abort a process at exit
    ("terminate called without an active exception", SIGABRT) once in a few dozen runs, after everything is done. The
    caller has closed its loaders (their threads joined) and written and closed its report."""
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    args, fwe = (sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]) if "--" in sys.argv else (
        sys.argv[1:], [])
    main(args[0], args[1], int(args[2]), int(args[3]), int(args[4]), "--hub" in args[5:], fwe)

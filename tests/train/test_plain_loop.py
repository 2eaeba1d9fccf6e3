"""A plain PyTorch loop trained from fwe through StatefulDataLoader(num_workers=2) resumes exactly in a fresh process:
the steps after the checkpoint see the same batches, byte for byte, and compute the same losses; each worker reads
its own documents, none twice in the epoch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import orjson
import pytest

from tests.helpers import REPO_ROOT, fwe_env
from fwe_cli.loader import FineWebLoader, resolve_config
from tests.train.corpus import doc_numbers, round_robin, write_corpus

pytest.importorskip("torch")
pytest.importorskip("torchdata.stateful_dataloader")


def _run(tmp_path, name: str, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, "-m", "tests.train.tiny_gpt", "--out", str(out), *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=fwe_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return orjson.loads(out.read_bytes())


def _tokens(hex_batch: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(hex_batch), dtype=np.int32)


def test_a_checkpoint_at_step_10_resumes_steps_11_to_20_exactly_in_a_fresh_process(tmp_path):
    """20 steps with a checkpoint (model, optimizer, DataLoader state) at step 10, then a fresh process loading it:
    its steps 11-20 get the same batches byte for byte and the same losses (to 1e-6) as the uninterrupted run, and
    the rest of the epoch after them is the same too. The epoch's batches are, in turn, those of the loaders over
    readers (2, 0) and (2, 1): each worker's documents are its own (worker 0 the first half of the file, worker 1
    the second), none begun twice."""
    corpus = str(write_corpus(tmp_path / "docs.jsonl", 300))
    checkpoint = str(tmp_path / "ckpt.pt")
    whole = _run(tmp_path, "whole", "--corpus", corpus, "--steps", "20", "--save-at", "10", "--checkpoint", checkpoint)
    resumed = _run(tmp_path, "resumed", "--corpus", corpus, "--steps", "20", "--resume", checkpoint)
    assert [s["step"] for s in resumed["steps"]] == list(range(11, 21))
    after = whole["steps"][10:]
    assert [s["batch"] for s in resumed["steps"]] == [s["batch"] for s in after]
    assert all(abs(r["loss"] - w["loss"]) <= 1e-6 for r, w in zip(resumed["steps"], after))
    assert resumed["rest"] == whole["rest"] and len(whole["rest"]) > 10
    epoch = [s["batch"] for s in whole["steps"]] + whole["rest"]
    per_worker = [_shard_batches(corpus, w) for w in range(2)]
    assert epoch == round_robin(per_worker)
    numbers = [doc_numbers(np.concatenate([_tokens(b) for b in batches])) for batches in per_worker]
    assert max(numbers[0]) < min(numbers[1])
    everything = numbers[0] + numbers[1]
    assert len(everything) == len(set(everything)) > 250


def _shard_batches(corpus: str, worker: int) -> list[str]:
    """The batches of the loader over worker `worker`'s shard (2, worker), as the loop records them."""
    config = resolve_config(env={}, local_path=corpus, tokenizer="byte", seq_len=32, batch_size=4, shard_mod=2,
                            shard_rem=worker)
    with FineWebLoader(config) as loader:
        return [batch.tobytes().hex() for batch in loader]

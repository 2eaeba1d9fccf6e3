"""The part of a torchtitan job that touches data, built from torchtitan's own classes, for the torchtitan tests:

    python -m tests.train.torchtitan_job FOLDER STEP N OUT_NPZ

builds fwe's dataloader the way torchtitan's Trainer does (its Config's `build`), loads the checkpoint of STEP under
FOLDER with torchtitan's CheckpointManager (torch.distributed.checkpoint), and saves the next N batches to OUT_NPZ."""

from __future__ import annotations

import sys

import numpy as np
import torch
from torchtitan.components.checkpoint import CheckpointManager

from fwe_cli.train.torchtitan import FineWebDataLoader

SETTINGS = {"source": "synthetic", "tokenizer": "byte"}
SEQ_LEN, BATCH, WORLD, RANK = 32, 2, 2, 1


class TrainState:
    """The Trainer's own checkpointed state ({"step", "ntokens_seen"}), as its `states={"train_state": self}`."""

    def __init__(self):
        self.step = 0
        self.ntokens_seen = 0

    def state_dict(self):
        return {"step": self.step, "ntokens_seen": self.ntokens_seen}

    def load_state_dict(self, state):
        self.step, self.ntokens_seen = state["step"], state["ntokens_seen"]


def job(folder: str) -> tuple[FineWebDataLoader, CheckpointManager, TrainState]:
    """fwe's dataloader for rank RANK of WORLD, a tiny model and its optimizer, and torchtitan's CheckpointManager
    over them, checkpointing into `folder`."""
    dataloader = FineWebDataLoader.Config(settings=SETTINGS).build(
        dp_world_size=WORLD, dp_rank=RANK, tokenizer=None, seq_len=SEQ_LEN, local_batch_size=BATCH,
        snapshot_every_n_steps=1)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_state = TrainState()
    checkpointer = CheckpointManager.Config(enable=True, folder=folder, interval=1, keep_latest_k=0,
                                           initial_load_model_only=False).build(
        dataloader=dataloader, model_parts=[model], optimizers=optimizer, lr_schedulers=None,
        states={"train_state": train_state}, sd_adapter=None)
    return dataloader, checkpointer, train_state


def steps(dataloader: FineWebDataLoader, train_state: TrainState, n: int) -> list[tuple[dict, torch.Tensor]]:
    """n training steps' batches, counted into the train state as the Trainer counts them."""
    out = []
    for _ in range(n):
        inputs, labels = next(dataloader)
        train_state.step += 1
        train_state.ntokens_seen += labels.numel()
        out.append((inputs, labels))
    return out


def main(folder: str, step: str, n: str, out: str) -> None:
    dataloader, checkpointer, train_state = job(folder)
    try:
        assert checkpointer.load(step=int(step)), "no checkpoint loaded"
        assert train_state.step == int(step), train_state.state_dict()
        batches = steps(dataloader, train_state, int(n))
        np.savez(out, input=np.stack([b[0]["input"].numpy() for b in batches]),
                 labels=np.stack([b[1].numpy() for b in batches]))
    finally:
        checkpointer.close()
        dataloader.close()


if __name__ == "__main__":
    main(*sys.argv[1:])

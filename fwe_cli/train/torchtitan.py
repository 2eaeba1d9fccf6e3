"""fwe as torchtitan's dataloader: a `BaseDataLoader` (torchtitan 0.3) that its Trainer builds from its config and
checkpoints with the rest of the job.

    from fwe_cli.train.torchtitan import FineWebDataLoader
    config.dataloader = FineWebDataLoader.Config(settings={"local_path": "/data/fwe_bootstrap"})

What torchtitan asks of a dataloader: a `Config` (a kw-only, slots dataclass) whose `build(dp_world_size=, dp_rank=,
tokenizer=, seq_len=, local_batch_size=, ...)` makes it; iteration yielding `({"input": [B, T], "positions": [B, T]},
labels [B, T])` as int64 tensors; and `state_dict`/`load_state_dict` (torch's `Stateful`), which its
CheckpointManager saves through torch.distributed.checkpoint under "dataloader" each interval and loads before
training starts. fwe shards documents by the data-parallel rank torchtitan gives (not the global rank: tensor and
pipeline peers get the same batches), packs `local_batch_size` rows of `seq_len` tokens, and defaults its tokenizer
to the trainer's tokenizer.json. The state is this rank's loader state (state.model.State) as JSON text under
`dp_rank_{r}` (one value per rank, whatever its contents: a checkpoint loads only the keys a fresh dataloader's state
names) and the world size, which must match on load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
from torchtitan.components.dataloader import BaseDataLoader

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, LoaderConfig, resolve_config
from fwe_cli.loader.state.model import State
from fwe_cli.train.state import started

# torchtitan sets these; a `settings` entry for one of them is refused rather than silently overridden.
OWNED = ("seq_len", "batch_size", "shard_mod", "shard_rem")


def loader_config(settings: dict[str, Any], *, seq_len: int, batch_size: int, dp_world_size: int, dp_rank: int,
                  tokenizer: object = None) -> LoaderConfig:
    """fwe's config for one data-parallel rank: `settings` (resolve_config's, by name) with torchtitan's shape and
    shard; the tokenizer defaults to `tokenizer`'s tokenizer.json when it has one (torchtitan's
    HuggingFaceTokenizer)."""
    taken = sorted(set(settings) & set(OWNED))
    if taken:
        raise ConfigError(f"FineWebDataLoader settings may not set {', '.join(taken)}: torchtitan's training.seq_len, "
                          "training.local_batch_size and data-parallel rank set them")
    settings = dict(settings)
    path = os.path.join(getattr(tokenizer, "tokenizer_path", None) or "", "tokenizer.json")
    if settings.get("tokenizer") is None and os.path.isfile(path):
        settings["tokenizer"] = path
    settings.update(labels=True, boundaries=True)  # inputs with next-token labels (none lost), and positions
    return resolve_config(seq_len=seq_len, batch_size=batch_size, shard_mod=dp_world_size, shard_rem=dp_rank,
                          **settings)


def titan_batch(batch: dict) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """torchtitan's `({"input": ..., "positions": ...}, labels)`, int64, from one of fwe's batches with labels and
    boundaries."""
    inputs = {"input": torch.as_tensor(batch["input"]).long(), "positions": torch.as_tensor(batch["positions"]).long()}
    return inputs, torch.as_tensor(batch["labels"]).long()


class FineWebDataLoader(BaseDataLoader):
    """fwe's batches for one data-parallel rank of a torchtitan job (see the module docstring)."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        settings: dict[str, Any] = field(default_factory=dict)
        """fwe's settings by resolve_config's names (source, local_path, dataset, tokenizer, shuffle_seed, epochs,
        ...); `dataset_path`, when given, is fwe's local_path."""

    def __init__(self, config: Config, *, dp_world_size: int, dp_rank: int, seq_len: int, local_batch_size: int,
                 tokenizer: object = None, **_ignored: Any):
        settings = dict(config.settings)
        if config.dataset_path:
            settings.setdefault("local_path", config.dataset_path)
        self.config = loader_config(settings, seq_len=seq_len, batch_size=local_batch_size,
                                    dp_world_size=dp_world_size, dp_rank=dp_rank, tokenizer=tokenizer)
        self.dp_world_size = dp_world_size
        self._key = f"dp_rank_{dp_rank}"
        self._loader: FineWebLoader | None = None  # started on the first batch, after any load_state_dict
        self._state: State | None = None  # where that loader starts (None: the stream's start)

    def __iter__(self) -> "FineWebDataLoader":
        return self

    def __next__(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        if self._loader is None:
            self._loader = FineWebLoader(*started(self.config, self._state))
        return titan_batch(next(self._loader))

    def state_dict(self) -> dict[str, Any]:
        state = self._loader.state() if self._loader is not None else self._state or State(self.config.shard)
        return {self._key: state.text(), "world_size": self.dp_world_size}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue after the last batch of `state_dict` (a `state_dict()` of this rank); an empty one changes
        nothing (torchtitan's convention). ConfigError when it was saved by another number of data-parallel ranks
        or is not this rank's."""
        if not state_dict:
            return
        saved = state_dict.get("world_size")
        if saved != self.dp_world_size:
            raise ConfigError(f"the dataloader state was saved by {saved} data-parallel ranks, this job has "
                              f"{self.dp_world_size}: resume with {saved}, or start the data without the state")
        if self._key not in state_dict:
            raise ConfigError(f"the dataloader state holds no {self._key} (it has {', '.join(sorted(state_dict))})")
        saved = State.from_envelope({"fwe": state_dict[self._key]}, "torchtitan dataloader")
        saved.check_place(self.config.shard, 0, False,
                          lambda reader, _w: f"data-parallel rank {reader.rem} of {reader.mod}")
        self.close()
        self._state = saved

    def close(self) -> None:
        """Stop the loader's threads (a later batch starts it again from where it was)."""
        if self._loader is not None:
            self._state = self._loader.state()
            self._loader.close()
            self._loader = None

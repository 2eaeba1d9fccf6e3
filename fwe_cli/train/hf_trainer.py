"""fwe in the Hugging Face Trainer: FineWebDataset's rows, and a callback that keeps fwe's position in every
checkpoint and restores it on `resume_from_checkpoint`, so a resumed run reads on from there.

    from fwe_cli.train.hf_trainer import FweDataCallback
    trainer = Trainer(model, TrainingArguments("out", max_steps=1000, save_steps=100),
                      train_dataset=FineWebDataset(config, samples=True))
    FweDataCallback.attach(trainer)
    trainer.train(resume_from_checkpoint=True)

Unhelped, a resumed Trainer re-reads every batch the checkpoint had consumed in its epoch and drops them
(`skip_first_batches`): the data of hours of training read again. `attach` turns that off (`ignore_data_skip`), has
accelerate build torchdata's StatefulDataLoader (it knows which batches the Trainer took, and holds each DataLoader
worker's FineWebDataset state), lets the Trainer restore callback states (`restore_callback_states_from_checkpoint`)
and adds the callback. On several processes (torchrun, accelerate launch) each rank reads its own share: accelerate
would otherwise have rank 0 read and dispatch every batch (its default for an IterableDataset), or, told not to,
wrap the dataset to keep every N-th batch of each rank's already dealt share (IterableDatasetShard). `attach` turns
dispatching off and hands the Trainer's DataLoader the dataset itself; the callback checks, before the first step,
that the dataset's reader is the Trainer's process: a Trainer that would still dispatch or re-shard, or a config of
another rank, is a one-line ConfigError. The callback stores the DataLoader's state of every rank (gathered over
torch.distributed when it runs) in the checkpoint's trainer_state.json, and on resume loads this rank's into the
DataLoader before its first batch. A Trainer without those settings, or a checkpoint without fwe's state, is a
one-line ConfigError rather than a silently re-read epoch. In sample mode a checkpoint inside one of fwe's batches
re-reads that batch: give the config the Trainer's per-device batch size.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from fwe_cli.errors import ConfigError
from fwe_cli.loader.remote.job_ranks import torch_distributed


class FweDataCallback(TrainerCallback, ExportableState):
    """Saves every rank's DataLoader state (fwe's position in each worker) with each checkpoint; restores this rank's
    when training resumes from one."""

    @classmethod
    def attach(cls, trainer) -> "FweDataCallback":
        """Set `trainer` up for fwe's resume (its DataLoader torchdata's StatefulDataLoader, ignore_data_skip and
        restore_callback_states_from_checkpoint on) and for each rank to read its own share (accelerate's batch
        dispatching off), and add the callback; returns it."""
        trainer.accelerator.dataloader_config.use_stateful_dataloader = True
        trainer.accelerator.dataloader_config.dispatch_batches = False
        trainer.accelerator.dataloader_config.split_batches = False
        make = trainer.get_train_dataloader
        trainer.get_train_dataloader = lambda: _unwrapped(make())
        trainer.args.ignore_data_skip = True
        trainer.args.restore_callback_states_from_checkpoint = True
        callback = cls()
        trainer.add_callback(callback)
        return callback

    def __init__(self) -> None:
        self.data_states: list | None = None
        """Every rank's DataLoader state at the last checkpoint (restored by the Trainer from trainer_state.json)."""
        self._dataloader: Any = None

    def state(self) -> dict:
        """What the Trainer writes into trainer_state.json with each checkpoint (ExportableState)."""
        return {"args": {}, "attributes": {"data_states": self.data_states}}

    def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
        self._dataloader = train_dataloader
        _check_arguments(args, train_dataloader)
        _read_own_share(args, train_dataloader)
        if self.data_states is not None:
            if len(self.data_states) != args.world_size:
                raise ConfigError(f"the checkpoint holds fwe's data state of {len(self.data_states)} ranks, this run "
                                  f"has {args.world_size}: resume with the world size it was saved with")
            train_dataloader.load_state_dict(self.data_states[args.process_index])
        elif state.global_step > 0:
            raise ConfigError(f"resuming at step {state.global_step} from a checkpoint without fwe's data state "
                              "(saved without FweDataCallback, or restore_callback_states_from_checkpoint is off): "
                              "fwe would start its data over")

    def on_step_end(self, args, state, control, **kwargs):
        self._keep(control)

    def on_epoch_end(self, args, state, control, **kwargs):
        self._keep(control)

    def _keep(self, control) -> None:
        """A checkpoint follows: take every rank's DataLoader state now (before the Trainer writes `state()`; every
        rank takes part in the gather, only the first writes)."""
        if control.should_save and self._dataloader is not None:
            self.data_states = _every_rank(self._dataloader.state_dict())


def _check_arguments(args, dataloader) -> None:
    """ConfigError naming the first setting `attach` makes that the Trainer lacks."""
    settings = {"ignore_data_skip": args.ignore_data_skip,
                "restore_callback_states_from_checkpoint": args.restore_callback_states_from_checkpoint,
                "a StatefulDataLoader": getattr(dataloader, "use_stateful_dataloader", False)}
    missing = next((name for name, value in settings.items() if not value), None)
    if missing:
        raise ConfigError(f"FweDataCallback needs {missing} (a resumed Trainer would re-read the data fwe's state moved "
                          "past, or lose it): add it with FweDataCallback.attach(trainer)")


def _unwrapped(dataloader):
    """The Trainer's prepared dataloader reading the FineWebDataset itself: accelerate wraps an IterableDataset in an
    IterableDatasetShard on several processes, which would keep every N-th batch of this rank's already dealt share
    and hide the dataset's state from torchdata. The DataLoader's iterator accelerate made (to take a first state)
    is let go, so the next one reads the dataset."""
    from fwe_cli.train.torch_dataset import FineWebDataset

    base = getattr(dataloader, "base_dataloader", dataloader)
    shard = getattr(base, "dataset", None)
    inner = getattr(shard, "dataset", None) if type(shard).__name__ == "IterableDatasetShard" else None
    if isinstance(inner, FineWebDataset):
        object.__setattr__(base, "dataset", inner)  # (a DataLoader refuses a new dataset by plain assignment)
        if getattr(base, "_iterator", None) is not None:
            base._iterator = None
            base._initial_iter_for_state_dict = False
    return dataloader


def _read_own_share(args, dataloader) -> None:
    """ConfigError unless each process reads its own share: not a dataloader accelerate dispatches from rank 0, and
    a FineWebDataset whose reader is this process (rank `process_index` of `world_size`)."""
    from fwe_cli.loader.shard import Shard
    from fwe_cli.train.torch_dataset import FineWebDataset

    if type(dataloader).__name__ == "DataLoaderDispatcher":
        raise ConfigError("accelerate dispatches the batches from rank 0 (dispatch_batches): every rank would train "
                          "on rank 0's share; leave dispatch_batches off (FweDataCallback.attach turns it off)")
    dataset = getattr(getattr(dataloader, "base_dataloader", dataloader), "dataset", None)
    if type(dataset).__name__ == "IterableDatasetShard":
        raise ConfigError("accelerate re-shards the FineWebDataset (IterableDatasetShard): every rank would train on "
                          "a part of its share; make the Trainer's dataloader after FweDataCallback.attach")
    if isinstance(dataset, FineWebDataset) and dataset.config.shard != Shard(args.world_size, args.process_index):
        shard = dataset.config.shard
        raise ConfigError(f"the FineWebDataset's config reads as rank {shard.rem} of {shard.mod}, this is process "
                          f"{args.process_index} of {args.world_size}: build the config in each process "
                          "(resolve_config takes the rank from torchrun's RANK and WORLD_SIZE)")


def _every_rank(state: dict) -> list:
    """[this rank's state] alone, or every rank's under torch.distributed (all_gather_object)."""
    dist = torch_distributed()
    if dist is None:
        return [state]
    states: list = [None] * dist.get_world_size()
    dist.all_gather_object(states, state)
    return states

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
and adds the callback. The callback stores the DataLoader's state of every rank (gathered over torch.distributed when
it runs) in the checkpoint's trainer_state.json, and on resume loads this rank's into the DataLoader before its first
batch. A Trainer without those settings, or a checkpoint without fwe's state, is a one-line ConfigError rather than a
silently re-read epoch. In sample mode a checkpoint inside one of fwe's batches re-reads that batch: give the config
the Trainer's per-device batch size.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from fwe_cli.errors import ConfigError
from fwe_cli.loader.job_ranks import torch_distributed


class FweDataCallback(TrainerCallback, ExportableState):
    """Saves every rank's DataLoader state (fwe's position in each worker) with each checkpoint; restores this rank's
    when training resumes from one."""

    @classmethod
    def attach(cls, trainer) -> "FweDataCallback":
        """Set `trainer` up for fwe's resume (its DataLoader torchdata's StatefulDataLoader, ignore_data_skip and
        restore_callback_states_from_checkpoint on) and add the callback; returns it."""
        trainer.accelerator.dataloader_config.use_stateful_dataloader = True
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


def _every_rank(state: dict) -> list:
    """[this rank's state] alone, or every rank's under torch.distributed (all_gather_object)."""
    dist = torch_distributed()
    if dist is None:
        return [state]
    states: list = [None] * dist.get_world_size()
    dist.all_gather_object(states, state)
    return states

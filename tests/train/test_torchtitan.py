"""fwe as torchtitan's dataloader, driven by torchtitan's own classes: its Config builds it as the Trainer does, its
batches are torchtitan's `({"input", "positions"}, labels)`, and torchtitan's CheckpointManager saves it and
restores it in a fresh process, which continues with the same batches; best-fit rows resume through its state."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("torchtitan.components.dataloader")

from torch.distributed.checkpoint.stateful import Stateful  # noqa: E402
from torchtitan.components.dataloader import BaseDataLoader  # noqa: E402
from torchtitan.components.tokenizer import HuggingFaceTokenizer  # noqa: E402

from fwe_cli.errors import ConfigError  # noqa: E402
from fwe_cli.loader import FineWebLoader  # noqa: E402
from fwe_cli.loader.shard import Shard  # noqa: E402
from fwe_cli.train.torchtitan import FineWebDataLoader, titan_batch  # noqa: E402
from tests.helpers import REPO_ROOT, fwe_env  # noqa: E402
from tests.train.torchtitan_job import BATCH, RANK, SEQ_LEN, SETTINGS, WORLD, job, steps  # noqa: E402


def build(world=WORLD, rank=RANK, trainer_tokenizer=None, **settings):
    """fwe's dataloader as torchtitan's Trainer builds it (Config.build with the Trainer's arguments)."""
    return FineWebDataLoader.Config(settings={**SETTINGS, **settings}).build(
        dp_world_size=world, dp_rank=rank, tokenizer=trainer_tokenizer, seq_len=SEQ_LEN, local_batch_size=BATCH,
        snapshot_every_n_steps=1)


def test_torchtitans_config_builds_a_dataloader_of_its_batch_format_for_its_dp_rank():
    """Built by torchtitan's Config.build, the dataloader is a Stateful BaseDataLoader whose batches are
    ({"input": int64 [B, T], ...}, labels int64 [B, T]) with labels[:, :-1] == input[:, 1:] (positions, when there,
    [B, T] too), cut from the documents of the data-parallel rank's shard."""
    dataloader = build()
    assert isinstance(dataloader, BaseDataLoader) and isinstance(dataloader, Stateful)
    assert dataloader.config.shard == Shard(WORLD, RANK)
    got = [next(dataloader) for _ in range(3)]
    dataloader.close()
    with FineWebLoader(dataloader.config) as loader:
        expected = [titan_batch(loader.next_batch()) for _ in range(3)]
    for (inputs, labels), (want_inputs, want_labels) in zip(got, expected):
        assert inputs["input"].shape == labels.shape == (BATCH, SEQ_LEN)
        assert inputs["input"].dtype == labels.dtype == torch.int64
        assert (labels[:, :-1] == inputs["input"][:, 1:]).all()
        assert set(inputs) <= {"input", "positions"}
        assert all(v.shape == (BATCH, SEQ_LEN) for v in inputs.values())
        assert (inputs["input"] == want_inputs["input"]).all() and (labels == want_labels).all()


def test_torchtitans_checkpoint_manager_restores_the_dataloader_in_a_fresh_process(tmp_path):
    """torchtitan's CheckpointManager saves the dataloader with a model, optimizer and train state at step 5
    (torch.distributed.checkpoint); a fresh process that builds the job and loads step 5 gets the batches of steps
    6-10 of the first process, input and labels identical."""
    folder = str(tmp_path / "checkpoint")
    dataloader, checkpointer, train_state = job(folder)
    try:
        steps(dataloader, train_state, 5)
        assert checkpointer.save(curr_step=5)
        expected = steps(dataloader, train_state, 5)
    finally:
        checkpointer.close()
        dataloader.close()
    out = tmp_path / "resumed.npz"
    proc = subprocess.run([sys.executable, "-m", "tests.train.torchtitan_job", folder, "5", "5", str(out)],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=fwe_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = np.load(out)
    assert np.array_equal(resumed["input"], np.stack([b[0]["input"].numpy() for b in expected]))
    assert np.array_equal(resumed["labels"], np.stack([b[1].numpy() for b in expected]))


def test_a_state_of_another_data_parallel_world_is_refused_naming_both_sizes():
    """A dataloader state saved by 2 data-parallel ranks, loaded by a job of 3, is a ConfigError naming both sizes
    (fwe would otherwise read another rank's documents); an empty state changes nothing (torchtitan's convention)."""
    saved = build(world=2, rank=1)
    next(saved)
    state = saved.state_dict()
    saved.close()
    other = build(world=3, rank=1)
    other.load_state_dict({})
    with pytest.raises(ConfigError, match="saved by 2 data-parallel ranks, this job has 3"):
        other.load_state_dict(state)


def test_settings_torchtitan_owns_are_refused_and_the_tokenizer_defaults_to_the_trainers(gpt2_tokenizer_json):
    """fwe reads with the trainer's tokenizer (torchtitan's HuggingFaceTokenizer directory's tokenizer.json) unless
    its settings name one; a setting torchtitan owns (seq_len, batch_size, the shard) is refused, naming it."""
    tokenizer = HuggingFaceTokenizer.Config().build(tokenizer_path=os.path.dirname(gpt2_tokenizer_json))
    dataloader = build(trainer_tokenizer=tokenizer, tokenizer=None)
    assert dataloader.config.tokenizer == gpt2_tokenizer_json
    inputs, _labels = next(dataloader)
    dataloader.close()
    assert int(inputs["input"].max()) < 50257
    with pytest.raises(ConfigError, match="may not set seq_len"):
        build(seq_len=64)


def test_the_runbooks_torchtitan_section_runs_as_written(tmp_path):
    """Every block of runbooks/train.md's torchtitan section runs as written; its resumed run (a fresh process that
    loads step 5 through torchtitan's CheckpointManager) prints the first run's steps 6-10, token for token."""
    from tests.train.runbook_sections import check_resumes_after_step_5

    check_resumes_after_step_5("torchtitan", tmp_path, "titan_data.py")


def test_a_batch_of_the_loaders_labels_and_boundaries_modes_becomes_torchtitans_tuple():
    """A batch of the loader's labels and boundaries modes (a dict of int32 input, labels, positions, cu_seqlens)
    becomes ({"input", "positions"}, labels), int64, value for value; cu_seqlens (varlen attention's, which torchtitan
    derives from positions itself) is left out."""
    rng = np.random.default_rng(3)
    batch = {"input": rng.integers(0, 50257, (2, 8), dtype=np.int32),
             "labels": rng.integers(0, 50257, (2, 8), dtype=np.int32),
             "positions": np.tile(np.arange(8, dtype=np.int32), (2, 1)),
             "cu_seqlens": np.tile(np.array([0, 8] + [8] * 7, dtype=np.int32), (2, 1))}
    inputs, labels = titan_batch(batch)
    assert set(inputs) == {"input", "positions"}
    assert all(t.dtype == torch.int64 for t in (*inputs.values(), labels))
    assert np.array_equal(inputs["input"].numpy(), batch["input"]) and np.array_equal(labels.numpy(), batch["labels"])
    assert np.array_equal(inputs["positions"].numpy(), batch["positions"])


def test_best_fit_rows_resume_through_the_dataloaders_state():
    """With pack best-fit: every row's first position is 0, and the dataloader's state_dict after 7 batches, loaded
    into a new one, gives the next 5 batches of the uninterrupted one."""
    first = build(pack="best-fit", pack_buffer=64, boundaries=True)
    for _ in range(7):
        inputs, _labels = next(first)
        assert (inputs["positions"][:, 0] == 0).all()
    state = first.state_dict()
    expected = [next(first) for _ in range(5)]
    first.close()
    second = build(pack="best-fit", pack_buffer=64, boundaries=True)
    second.load_state_dict(state)
    got = [next(second) for _ in range(5)]
    second.close()
    for (inputs, labels), (want_inputs, want_labels) in zip(got, expected, strict=True):
        assert (inputs["input"] == want_inputs["input"]).all() and (labels == want_labels).all()
        assert (inputs["positions"] == want_inputs["positions"]).all()

"""The Hugging Face Trainer on FineWebDataset's rows with FweDataCallback: a run resumed from its step-5 checkpoint
trains on the same batches 6-10 as the uninterrupted run, its loader reading on from the checkpoint's position (none
of batches 1-5 read again); the settings it needs, and a checkpoint without fwe's state, are one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import resolve_config
from fwe_cli.loader.tokenization.names import BYTE_EOS_ID
from tests.helpers import REPO_ROOT, fwe_env

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata.stateful_dataloader")
transformers = pytest.importorskip("transformers")

from fwe_cli.loader import FineWebDataset  # noqa: E402
from fwe_cli.train.hf_trainer import FweDataCallback  # noqa: E402

SEQ_LEN, ROWS = 32, 4


def _config():
    # without prefetch the loader reads exactly the batches the DataLoader asks for: its counters show what was read
    return resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=SEQ_LEN, batch_size=ROWS,
                          prefetch=False)


def _trainer(out, dataset, seen: list, num_workers: int = 0, attach: bool = True):
    """A 2-layer GPT-2 (byte vocabulary) Trainer of 10 steps, a checkpoint every 5, FweDataCallback attached; `seen`
    gets each step's input_ids."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=BYTE_EOS_ID + 1, n_positions=SEQ_LEN, n_embd=32, n_layer=2, n_head=2, bos_token_id=BYTE_EOS_ID,
        eos_token_id=BYTE_EOS_ID))
    model.register_forward_pre_hook(lambda _m, _a, kwargs: seen.append(kwargs["input_ids"].clone()), with_kwargs=True)
    args = transformers.TrainingArguments(str(out), max_steps=10, save_steps=5, per_device_train_batch_size=ROWS,
                                          learning_rate=1e-3, use_cpu=True, report_to=[], disable_tqdm=True,
                                          dataloader_num_workers=num_workers)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset)
    if attach:
        FweDataCallback.attach(trainer)
    return trainer


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resuming_from_the_step_5_checkpoint_trains_on_batches_6_to_10_without_reading_1_to_5(tmp_path, num_workers):
    """10 steps with checkpoints at 5 and 10; a new Trainer resumed from checkpoint-5 sees the uninterrupted run's
    batches 6-10, each with its labels = input_ids. Without workers the loader's own counters show the resumed
    run read 5 of fwe's batches fewer than the whole run (the rows of batches 1-5 are not read again)."""
    whole, resumed = [], []
    first = FineWebDataset(_config(), samples=True)
    _trainer(tmp_path / "out", first, whole, num_workers).train()
    assert len(whole) == 10 and (tmp_path / "out" / "checkpoint-5").is_dir()
    second = FineWebDataset(_config(), samples=True)
    _trainer(tmp_path / "out", second, resumed, num_workers).train(
        resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-5"))
    assert len(resumed) == 5 and all(torch.equal(a, b) for a, b in zip(resumed, whole[5:]))
    if num_workers == 0:
        assert first.stats()["batches_produced"] - second.stats()["batches_produced"] == 5


def test_missing_settings_and_a_checkpoint_without_fwes_state_are_refused(tmp_path):
    """With one of the settings `attach` makes turned back off, training stops before its first step naming it. A checkpoint saved without fwe's state: the resumed
    run stops rather than starting the data over."""
    for setting in ("ignore_data_skip", "restore_callback_states_from_checkpoint", "a StatefulDataLoader"):
        trainer = _trainer(tmp_path / setting.replace(" ", "_"), FineWebDataset(_config(), samples=True), [])
        if setting.startswith("a "):
            trainer.accelerator.dataloader_config.use_stateful_dataloader = False
        else:
            setattr(trainer.args, setting, False)
        with pytest.raises(ConfigError, match=f"needs {setting} "):
            trainer.train()
    _trainer(tmp_path / "plain", FineWebDataset(_config(), samples=True), [], attach=False).train()
    resumed = _trainer(tmp_path / "plain", FineWebDataset(_config(), samples=True), [])
    with pytest.raises(ConfigError, match="resuming at step 5 from a checkpoint without fwe's data state"):
        resumed.train(resume_from_checkpoint=str(tmp_path / "plain" / "checkpoint-5"))


def test_fwe_imports_no_transformers():
    """The loader, its torch dataset and the train package's face import no transformers (seconds of import): only
    fwe_cli.train.hf_trainer does."""
    code = ("import sys, fwe_cli.train, fwe_cli.loader\nfwe_cli.loader.FineWebDataset\n"
            "print('transformers' in sys.modules)\nimport fwe_cli.train.hf_trainer\nprint('transformers' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
                          env=fwe_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "True"]

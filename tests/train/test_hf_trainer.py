"""The Hugging Face Trainer on FineWebDataset's rows with FweDataCallback: a run resumed from its step-5 checkpoint
trains on the same batches 6-10 as the uninterrupted run, its loader reading on from the checkpoint's position (none
of batches 1-5 read again); under torchrun each of 2 processes trains on its own share and resumes it exactly; the
settings it needs, a shard that is not the process's, and a checkpoint without fwe's state are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import resolve_config
from fwe_cli.loader.tokenization.names import BYTE_EOS_ID
from tests.helpers import REPO_ROOT, fwe_env, write_jsonl

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


JOB_TIMEOUT_S = 300  # a bound on a hung rendezvous or collective, not an expected duration
DOCS = [f"rank test document {i:04d}" for i in range(64)]  # 23 bytes + separator: one document a row of 24 tokens


def _torchrun(work, out, workers: int, checkpoint=None) -> list[list[str]]:
    """tests/train/hf_trainer_job.py under `torchrun --nproc-per-node 2`; each rank's rows, in training order."""
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--standalone", "--nproc-per-node", "2", str(REPO_ROOT / "tests" / "train" /
               "hf_trainer_job.py"), str(work / "docs.jsonl"), str(out), "--workers", str(workers)]
    proc = subprocess.run(command + ([str(checkpoint)] if checkpoint else []), capture_output=True, text=True,
                          cwd=work, timeout=JOB_TIMEOUT_S, env=fwe_env(OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-6000:])
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [report["shard"] for report in reports] == [[2, 0], [2, 1]]
    return [report["rows"] for report in reports]


@pytest.fixture(scope="module", params=[0, 2], ids=["workers0", "workers2"])
def two_processes(request, tmp_path_factory):
    """A 2-process job (4 steps of 2 micro-batches, checkpoints at 2 and 4), then a second one resumed from its
    checkpoint-2; returns (whole, resumed): each rank's rows."""
    work = tmp_path_factory.mktemp(f"hf2_{request.param}")
    write_jsonl(work / "docs.jsonl", [{"text": text} for text in DOCS])
    whole = _torchrun(work, work / "whole", request.param)
    resumed = _torchrun(work, work / "resumed", request.param, work / "whole" / "run" / "checkpoint-2")
    return whole, resumed


def test_two_processes_read_disjoint_shares_that_cover_every_document(two_processes):
    """Under torchrun with 2 processes (DataLoader workers 0 or 2 each) every process trains on its own documents:
    no row twice within or across processes, all 64 documents once (the Trainer neither dispatches one process's
    batches nor shards them again)."""
    whole, _ = two_processes
    assert all(len(rows) == 32 for rows in whole)
    assert sorted(whole[0] + whole[1]) == DOCS


def test_two_processes_resumed_from_checkpoint_2_train_on_the_rows_after_it(two_processes):
    """Each process resumed from checkpoint-2 (2 steps × 2 micro-batches × 4 rows in) trains on exactly the rows the
    uninterrupted job trained on after step 2, in the same order."""
    whole, resumed = two_processes
    assert resumed == [rows[16:] for rows in whole]


def test_a_config_shard_that_is_not_the_trainers_process_is_refused(tmp_path):
    """A dataset configured for shard 1 of 2 in a 1-process Trainer would train on half the data unnoticed: the run
    stops before its first step naming both."""
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=SEQ_LEN, batch_size=ROWS,
                            prefetch=False, shard_mod=2, shard_rem=1)
    with pytest.raises(ConfigError, match="config reads as rank 1 of 2, this is process 0 of 1"):
        _trainer(tmp_path / "out", FineWebDataset(config, samples=True), []).train()


def test_fwe_imports_no_transformers():
    """The loader, its torch dataset and the train package's face import no transformers (seconds of import): only
    fwe_cli.train.hf_trainer does."""
    code = ("import sys, fwe_cli.train, fwe_cli.loader\nfwe_cli.loader.FineWebDataset\n"
            "print('transformers' in sys.modules)\nimport fwe_cli.train.hf_trainer\nprint('transformers' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
                          env=fwe_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "True"]

"""Best-fit rows through the adapters: a state saved after batch 7 resumes batch for batch through
StatefulDataLoader(num_workers=2) and through Grain's iterator, and in sample mode (the HF Trainer's rows) in the
middle of a batch, the same as the uninterrupted run; every row starts at a document."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from fwe_cli.loader import FineWebDataset, resolve_config  # noqa: E402

StatefulDataLoader = stateful.StatefulDataLoader


def _config(**kw):
    return resolve_config(env={}, source="synthetic", seed=9, tokenizer="byte", seq_len=512, batch_size=2,
                          pack="best-fit", pack_buffer=64, boundaries=True, **kw)


def _resume(config, taken: int, samples: bool = False, **kw) -> tuple[list, list]:
    """(the uninterrupted items after `taken`, up to 8 of them; the first 8 items of a new DataLoader given the
    state saved after `taken`, through JSON)."""
    first = StatefulDataLoader(FineWebDataset(config, samples=samples), **kw)
    items = iter(first)
    for _ in range(taken):
        next(items)
    state = orjson.loads(orjson.dumps(first.state_dict()))
    rest = [next(items) for _ in range(8)]
    del items, first
    second = StatefulDataLoader(FineWebDataset(config, samples=samples), **kw)
    second.load_state_dict(state)
    resumed = iter(second)
    return rest, [next(resumed) for _ in range(8)]


def test_two_dataloader_workers_resume_best_fit_rows_after_batch_7():
    """2 workers (readers of their own, each with its own buffer): the state after 7 batches resumes with the same
    next 8 batches, inputs and positions alike, every row starting at position 0."""
    rest, resumed = _resume(_config(), 7, batch_size=None, num_workers=2)
    for a, b in zip(rest, resumed, strict=True):
        assert torch.equal(a["input"], b["input"]) and torch.equal(a["positions"], b["positions"])
        assert (b["positions"][:, 0] == 0).all()


def test_sample_rows_resume_inside_a_best_fit_batch():
    """Sample mode, 3 rows a step from batches of 2: the state falls inside a batch; the resumed rows are the
    uninterrupted ones, position_ids included."""
    rest, resumed = _resume(_config(), 5, samples=True, batch_size=3)
    for a, b in zip(rest, resumed, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["position_ids"], b["position_ids"])


def test_grains_iterator_resumes_best_fit_rows_at_batch_7():
    """Grain's FineWebIterDataset: the state after 7 batches set on a new iterator gives the next batches."""
    grain_dataset = pytest.importorskip("fwe_cli.train.grain_dataset")
    dataset = grain_dataset.FineWebIterDataset(_config())
    first = iter(dataset)
    for _ in range(7):
        next(first)
    state = orjson.loads(orjson.dumps(first.get_state()))
    rest = [next(first) for _ in range(5)]
    first.close()
    second = iter(dataset)
    second.set_state(state)
    again = [next(second) for _ in range(5)]
    second.close()
    assert all(np.array_equal(a["input"], b["input"]) for a, b in zip(rest, again, strict=True))

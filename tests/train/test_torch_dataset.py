"""FineWebDataset: fwe's batches through torch DataLoaders, each worker over its own documents, resumed exactly by
torchdata's StatefulDataLoader in each worker (batches and single rows), a changed world size or num_workers
refused naming both, passes shuffled by set_epoch."""

from __future__ import annotations

import re

import numpy as np
import orjson
import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from fwe_cli.errors import ConfigError, TokenizerError  # noqa: E402
from fwe_cli.loader import FineWebDataset, FineWebLoader, resolve_config  # noqa: E402
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.train.torch_dataset import sample_rows  # noqa: E402
from tests.train.corpus import doc_numbers, round_robin, write_corpus  # noqa: E402

StatefulDataLoader = stateful.StatefulDataLoader
DOCS = 120


@pytest.fixture()
def corpus(tmp_path):
    return write_corpus(tmp_path / "docs.jsonl", DOCS)


def _config(corpus, **kw):
    return resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=16, batch_size=4, **kw)


def _loader_batches(config) -> list[np.ndarray]:
    with FineWebLoader(config) as loader:
        return list(loader)


def _arrays(batches) -> list[np.ndarray]:
    return [np.asarray(b) for b in batches]


def _same(got, expected) -> bool:
    return len(got) == len(expected) and all(np.array_equal(g, e) for g, e in zip(_arrays(got), _arrays(expected)))


def test_batches_pass_through_without_workers(corpus):
    """batch_size=None in the main process: the DataLoader yields fwe's own batches, every one, as int32 tensors."""
    config = _config(corpus)
    got = list(torch.utils.data.DataLoader(FineWebDataset(config), batch_size=None))
    assert all(isinstance(b, torch.Tensor) and b.dtype == torch.int32 and b.shape == (4, 16) for b in got)
    assert _same(got, _loader_batches(config))


@pytest.mark.parametrize("world,rank", [(1, 0), (2, 1)])
def test_each_worker_reads_its_own_documents(corpus, world, rank):
    """Two workers on rank `rank` of `world`: the DataLoader's batches are, in turn, those of the loaders of readers
    (world x 2, rank x 2 + worker); the two workers' documents are disjoint, none is begun twice in the epoch, and
    together they are exactly the rank's documents (with world 1, every document)."""
    config = _config(corpus, shard_mod=world, shard_rem=rank)
    got = list(StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2))
    per_worker = [_loader_batches(_config(corpus, shard_mod=world * 2, shard_rem=rank * 2 + w)) for w in range(2)]
    assert _same(got, round_robin(per_worker))
    numbers = [doc_numbers(np.concatenate([b.reshape(-1) for b in batches])) for batches in per_worker]
    assert not set(numbers[0]) & set(numbers[1]) and numbers[0] and numbers[1]
    workers = [[d.text for d in DocumentStream(config.replace(shard=Shard(world * 2, rank * 2 + w)))] for w in range(2)]
    assert workers[0] + workers[1] == [d.text for d in DocumentStream(config)]


def _resume(config, num_workers: int, taken: int, samples: bool = False, rows: int | None = None):
    """(the uninterrupted items after `taken`, the items of a fresh DataLoader given the state saved after `taken`
    (through JSON, as a checkpoint))."""
    kw = {"batch_size": rows} if samples else {"batch_size": None}
    first = StatefulDataLoader(FineWebDataset(config, samples=samples), num_workers=num_workers, **kw)
    items = iter(first)
    for _ in range(taken):
        next(items)
    state = orjson.loads(orjson.dumps(first.state_dict()))
    rest = list(items)
    second = StatefulDataLoader(FineWebDataset(config, samples=samples), num_workers=num_workers, **kw)
    second.load_state_dict(state)
    return rest, list(second)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stateful_dataloader_resumes_exactly(corpus, num_workers):
    """A state saved after 7 batches (the workers at different points) and loaded into a fresh DataLoader: the same
    batches follow as in the uninterrupted run, to the end of the epoch."""
    rest, resumed = _resume(_config(corpus), num_workers, 7)
    assert len(rest) > 10 and _same(resumed, rest)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_sample_rows_resume_exactly_within_a_batch(corpus, num_workers):
    """samples=True: rows of fwe's batches one at a time (int64 input_ids, labels the same row), collated 3 a step
    from batches of 4 rows, so the state is saved inside a batch; the resumed rows are the uninterrupted ones."""
    config = _config(corpus)
    rows = [row for batch in _loader_batches(_config(corpus, shard_mod=1)) for row in batch]
    if num_workers == 0:
        got = list(StatefulDataLoader(FineWebDataset(config, samples=True), batch_size=3))
        assert all(s["input_ids"].dtype == torch.int64 and torch.equal(s["input_ids"], s["labels"]) for s in got)
        assert _same([r for s in got for r in s["input_ids"]], rows[: len(rows) // 3 * 3])
    rest, resumed = _resume(config, num_workers, 5, samples=True, rows=3)
    assert len(rest) > 10 and _same([s["input_ids"] for s in resumed], [s["input_ids"] for s in rest])


def test_sample_rows_of_a_dict_batch_carry_position_ids():
    """A batch that is a dict (input, labels, positions, cu_seqlens) gives rows of input_ids, labels = input_ids (HF
    models shift them) and position_ids, as int64 rows of the batch."""
    inputs = np.arange(12, dtype=np.int32).reshape(2, 6)
    positions = np.array([[0, 1, 2, 0, 1, 2], [3, 0, 1, 2, 3, 4]], dtype=np.int32)
    batch = {"input": inputs, "labels": inputs + 1, "positions": positions,
             "cu_seqlens": np.zeros((2, 7), dtype=np.int32)}
    rows = sample_rows(batch)
    assert [sorted(r) for r in rows] == [["input_ids", "labels", "position_ids"]] * 2
    for i, row in enumerate(rows):
        assert row["input_ids"].dtype == torch.int64 and row["input_ids"].tolist() == inputs[i].tolist()
        assert row["labels"].tolist() == inputs[i].tolist() and row["position_ids"].tolist() == positions[i].tolist()


def test_dict_batches_pass_through_workers_and_resume(corpus):
    """With labels and boundaries a batch is a dict (input, labels, positions, cu_seqlens): through two workers each
    key arrives as a tensor equal to the shard loaders' arrays, and a resumed DataLoader continues with the same
    dicts."""
    config = _config(corpus, labels=True, boundaries=True)
    got = list(StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2))
    expected = round_robin([_loader_batches(_config(corpus, labels=True, boundaries=True, shard_mod=2, shard_rem=w))
                            for w in range(2)])
    assert len(got) == len(expected) > 10
    assert all(sorted(g) == ["cu_seqlens", "input", "labels", "positions"] for g in got)
    assert all(_same([g[k] for g in got], [e[k] for e in expected]) for k in expected[0])
    rest, resumed = _resume(config, 2, 5)
    assert all(_same([r[k] for r in resumed], [r[k] for r in rest]) for k in rest[0])


def test_sample_rows_with_boundaries_carry_position_ids_and_labels_mode_is_refused(corpus):
    """samples=True with boundaries: each row's position_ids are its batch row's positions; samples=True with labels
    (already shifted, which HF models would shift again) is refused in one line."""
    config = _config(corpus, boundaries=True)
    rows = [dict(input_ids=b["input"][i], position_ids=b["positions"][i]) for b in _loader_batches(config)
            for i in range(len(b["input"]))]
    got = list(torch.utils.data.DataLoader(FineWebDataset(config, samples=True), batch_size=None))
    assert len(got) == len(rows) > 10
    assert all(g["position_ids"].tolist() == r["position_ids"].tolist() and
               g["labels"].tolist() == g["input_ids"].tolist() == r["input_ids"].tolist() for g, r in zip(got, rows))
    with pytest.raises(ConfigError, match="leave labels off"):
        FineWebDataset(_config(corpus, labels=True), samples=True)


def _first_workers_state(config, num_workers: int) -> dict:
    loader = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=num_workers)
    items = iter(loader)
    for _ in range(3):
        next(items)
    return loader.state_dict()


def test_a_changed_num_workers_or_world_size_is_refused_naming_both(corpus):
    """A state saved with 2 workers, loaded with 3 or at another world size: ConfigError in one line naming what it
    was saved with and what this DataLoader has (raised in a worker, torch carries it to the caller after its
    traceback). Loaded without workers (whose states torchdata shapes differently) torchdata refuses it itself."""
    config = _config(corpus)
    state = _first_workers_state(config, 2)
    cases = [(config, 3, r"worker (\d) of num_workers=2, this is rank 0 of world size 1, worker \1 of num_workers=3"),
             (_config(corpus, shard_mod=2, shard_rem=0), 2,
              r"rank 0 of world size 1, worker (\d) of num_workers=2, this is rank 0 of world size 2, worker \1 ")]
    for resumed_config, num_workers, named in cases:  # whichever worker's error comes first
        loader = StatefulDataLoader(FineWebDataset(resumed_config), batch_size=None, num_workers=num_workers)
        loader.load_state_dict(state)
        with pytest.raises(ConfigError) as caught:
            next(iter(loader))
        line = str(caught.value).splitlines()[-1]
        assert re.search(named, line) and line.endswith("or start without the state"), line
    loader = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=0)
    loader.load_state_dict(state)
    with pytest.raises(AssertionError, match="single process dataloader"):
        next(iter(loader))


def test_a_state_of_the_other_mode_or_not_a_dataset_state_is_refused(corpus):
    """Batches and rows do not resume each other, and a FineWebLoader state is not a dataset state: one line each."""
    config = _config(corpus)
    state = FineWebDataset(config).state_dict()
    with pytest.raises(ConfigError, match="saved with samples=False, this dataset has samples=True"):
        FineWebDataset(config, samples=True).load_state_dict(state)
    with FineWebLoader(config) as loader:
        next(loader)
        with pytest.raises(ConfigError, match="not a FineWebDataset state"):
            FineWebDataset(config).load_state_dict(loader.state_dict())


def test_set_epoch_shuffles_each_pass_and_a_resumed_pass_keeps_its_epoch(corpus):
    """With a shuffle, passes 0 and 1 read every document in different orders; a state saved in pass 1 resumes pass
    1's order in a dataset never told the epoch."""
    config = _config(corpus, shuffle_seed=5, shuffle_window=16)
    dataset = FineWebDataset(config)
    passes = []
    for epoch in (0, 1):
        dataset.set_epoch(epoch)
        passes.append(list(StatefulDataLoader(dataset, batch_size=None)))
    orders = [doc_numbers(np.concatenate([np.asarray(b).reshape(-1) for b in p])) for p in passes]
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])
    dataset.set_epoch(1)
    loader = StatefulDataLoader(dataset, batch_size=None)
    items = iter(loader)
    for _ in range(5):
        next(items)
    fresh = StatefulDataLoader(FineWebDataset(config), batch_size=None)
    fresh.load_state_dict(loader.state_dict())
    assert _same(list(fresh), passes[1][5:])


def test_workers_start_with_the_tokenizer_proven_in_the_main_process(gpt2_tokenizer_json):
    """The constructor proves the tokenizer's fast backend once: a forked worker encodes every document with it
    (none with the slow backend it would otherwise use while proving it again)."""

    class Backends(FineWebDataset):
        def __iter__(self):
            for _batch in super().__iter__():
                yield dict(self.stats()["tokenizer"]["docs_by_backend"])

    config = resolve_config(env={}, source="synthetic", tokenizer=gpt2_tokenizer_json, seq_len=256, batch_size=2)
    loader = torch.utils.data.DataLoader(Backends(config), batch_size=None, num_workers=1)
    counts = next(iter(loader))
    assert set(counts) == {"tiktoken"} and counts["tiktoken"] > 0


def test_a_tokenizer_that_fails_to_load_fails_in_the_loader_as_without_the_dataset(tmp_path):
    """The constructor's early tokenizer load is no new place to fail: a tokenizer file that is missing makes the
    pass fail with the loader's TokenizerError, or, with synthetic_on_fail, fall back to synthetic data."""
    missing = str(tmp_path / "missing" / "tokenizer.json")
    config = resolve_config(env={}, source="synthetic", tokenizer=missing, seq_len=16, batch_size=2)
    with pytest.raises(TokenizerError, match="does not exist"):
        next(iter(torch.utils.data.DataLoader(FineWebDataset(config), batch_size=None)))
    with pytest.warns(RuntimeWarning, match="FALLING BACK TO SYNTHETIC DATA"):
        batch = next(iter(torch.utils.data.DataLoader(FineWebDataset(config.replace(synthetic_on_fail=True)),
                                                      batch_size=None)))
    assert batch.shape == (2, 16)


def test_a_pass_abandoned_for_a_newer_one_does_not_overwrite_where_the_newer_ended(corpus):
    """A pass begun, then a newer pass of the same dataset run to its end, then the abandoned one resumed (its loader
    closed, it ends): the dataset's state is still where the newer pass left it, done (a resume ends that pass at
    once, and the pass after it is a whole one), not the abandoned pass's place after its first batch."""
    dataset = FineWebDataset(_config(corpus))
    abandoned = iter(dataset)
    next(abandoned)
    newer = list(iter(dataset))
    assert list(abandoned) == [] and len(newer) > 10
    fresh = FineWebDataset(_config(corpus))
    fresh.load_state_dict(dataset.state_dict())
    assert list(fresh) == [] and _same(list(fresh), newer)

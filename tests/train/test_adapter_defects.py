"""The adapters hold in the settings real jobs use: persistent DataLoader workers, no workers, checkpoints at an
epoch's end or after a failure, a mix of token ids and text, a small cycled source, a node's cores, tensors made
outside the workers, one state and one numbering for every adapter, and a world of DataLoader workers resumed on
another (each test names the defect it guards, as the issue on adapters numbers them)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from fwe_cli.errors import SourceError  # noqa: E402
from fwe_cli.loader import FineWebDataset, FineWebLoader, resolve_config  # noqa: E402
from fwe_cli.loader.shard import Shard  # noqa: E402
from fwe_cli.loader.state.model import State  # noqa: E402
from fwe_cli.train.state import worker_reader  # noqa: E402
from tests.helpers import write_jsonl  # noqa: E402
from tests.train.corpus import doc_numbers, documents, write_corpus  # noqa: E402

StatefulDataLoader = stateful.StatefulDataLoader


def _config(path, **kw):
    return resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=16, batch_size=4, **kw)


def _numbers(batches) -> list[int]:
    return doc_numbers(np.concatenate([np.asarray(b).reshape(-1) for b in batches])) if batches else []


def test_2_persistent_workers_shuffle_each_epoch_anew(tmp_path):
    """(2) persistent_workers=True with a shuffle: set_epoch reaches the workers, so epochs 0, 1 and 2 each read
    every document in their own order, the first batches of the three differing."""
    corpus = write_corpus(tmp_path / "docs.jsonl", 120)
    dataset = FineWebDataset(_config(corpus, shuffle_seed=3, shuffle_window=16))
    loader = StatefulDataLoader(dataset, batch_size=None, num_workers=2, persistent_workers=True)
    epochs = []
    for epoch in range(3):
        dataset.set_epoch(epoch)
        epochs.append(list(loader))
    del loader  # its workers end now, not in a later test
    firsts = {np.asarray(e[0]).tobytes() for e in epochs}
    orders = [_numbers(e) for e in epochs]  # (each worker's last partial batch is not delivered)
    assert len(firsts) == 3 and len({tuple(o) for o in orders}) == 3
    assert all(len(set(o)) == len(o) >= 100 and set(o) <= set(range(120)) for o in orders)


def test_3_a_checkpoint_just_after_a_persistent_workers_reset_resumes_the_whole_new_pass(tmp_path):
    """(3) persistent_workers=True: after a pass, the next pass's iterator begins (both workers reset) and yields one
    batch; a checkpoint then resumes the rest of that pass, every batch (the worker that had not yet delivered reports
    its new pass's start, not its last pass's end)."""
    corpus = write_corpus(tmp_path / "docs.jsonl", 120)
    config = _config(corpus)
    loader = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2, persistent_workers=True)
    whole = list(loader)
    second = iter(loader)
    first = next(second)
    state = loader.state_dict()
    del second, loader  # its workers end now, not in a later test
    resumed = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert np.array_equal(np.asarray(first), np.asarray(whole[0]))
    assert len(rest) == len(whole) - 1 and all(np.array_equal(np.asarray(a), np.asarray(b))
                                               for a, b in zip(rest, whole[1:]))


def test_4_without_workers_a_checkpoint_at_an_epochs_end_resumes_into_a_whole_next_epoch(tmp_path):
    """(4) num_workers=0: a state taken after a whole epoch, loaded into a new DataLoader: the next pass is a whole
    epoch, every batch of it (not none)."""
    corpus = write_corpus(tmp_path / "docs.jsonl", 120)
    config = _config(corpus)
    loader = StatefulDataLoader(FineWebDataset(config), batch_size=None)
    whole = list(loader)
    resumed = StatefulDataLoader(FineWebDataset(config), batch_size=None)
    resumed.load_state_dict(loader.state_dict())
    again = list(resumed)
    assert len(whole) > 10 and len(again) == len(whole)


@pytest.mark.parametrize("workers", [0, 2])
def test_4_a_checkpoint_at_an_epochs_end_resumes_the_next_epoch_in_its_own_order(tmp_path, workers):
    """(4) A shuffled job (persistent workers when it has workers) checkpointed at the end of epoch 0 and resumed with
    set_epoch(1) reads the same whole epoch 1, batch for batch, as the uninterrupted job (the state of a pass that
    ended names no epoch of its own: set_epoch's holds), and epoch 1's order is not epoch 0's."""
    corpus = write_corpus(tmp_path / "docs.jsonl", 120)
    config = _config(corpus, shuffle_seed=5, shuffle_window=16)
    persist = {"persistent_workers": True} if workers else {}
    dataset = FineWebDataset(config)
    loader = StatefulDataLoader(dataset, batch_size=None, num_workers=workers, **persist)
    epochs = []
    for epoch in range(2):
        dataset.set_epoch(epoch)
        epochs.append([np.asarray(b) for b in loader])
        if epoch == 0:
            state = orjson.loads(orjson.dumps(loader.state_dict()))
    del loader  # its workers end now, not in a later test
    dataset = FineWebDataset(config)
    resumed = StatefulDataLoader(dataset, batch_size=None, num_workers=workers, **persist)
    resumed.load_state_dict(state)
    dataset.set_epoch(1)
    again = [np.asarray(b) for b in resumed]
    del resumed
    assert _numbers(epochs[0]) != _numbers(epochs[1])
    assert len(again) == len(epochs[1]) > 10 and all(np.array_equal(a, b) for a, b in zip(again, epochs[1]))


def test_5_without_workers_a_failed_pass_keeps_its_last_good_batch(tmp_path):
    """(5) num_workers=0, a bad record with bad_records=error: the pass fails after some batches; the state then is
    after the last batch delivered (not the start), and resumes past the bad record with the same batches a
    skipping run gives after it."""
    records = [{"text": t} for t in documents(120)]
    records[60] = {"text": None}
    corpus = write_jsonl(tmp_path / "docs.jsonl", records)
    loader = StatefulDataLoader(FineWebDataset(_config(corpus, bad_records="error")), batch_size=None)
    got = []
    with pytest.raises(SourceError, match="docs.jsonl:61"):
        for batch in loader:
            got.append(np.asarray(batch))
    state = orjson.loads(loader.state_dict()["dataset_state"]["fwe"])
    assert got and state["status"] == "at" and state["batches"] == len(got)
    skipping = list(StatefulDataLoader(FineWebDataset(_config(corpus)), batch_size=None))
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(got, skipping))


def test_6_a_mix_by_documents_of_token_ids_and_text_keeps_both(tmp_path):
    """(6) A mix by documents of a token directory and a JSONL source: every document the mix takes from the token
    directory reaches the batches (its ids are used whatever document opens the tokenizer's batch)."""
    from tests.loader.test_mixture import mix_file
    from tests.loader.token_dirs import write_token_dir

    tokens = write_token_dir(tmp_path / "tokens", [f"<{i:03d}>" + "t" * (5 + i % 7) + f"</{i:03d}>"
                                                   for i in range(100)], "byte")
    text = write_jsonl(tmp_path / "text.jsonl", [{"text": "x" * (5 + i % 7)} for i in range(400)])
    path = mix_file(tmp_path, {"weight": 1, "local_path": str(text)}, {"weight": 1, "local_path": str(tokens)},
                    by="documents")
    config = resolve_config(env={}, mix=path, tokenizer="byte", seq_len=64, batch_size=2, doc_batch=8)
    with FineWebLoader(config) as loader:
        numbers = _numbers(list(loader))
    assert numbers == list(range(len(numbers))) and len(numbers) >= 95  # up to the last whole batch, in order


def test_7_a_small_cycled_source_does_not_fail_the_readers_whose_share_holds_none_of_it(tmp_path):
    """(7) A mix with a cycled source of 3 documents at 4 ranks: rank 3's share of it holds none, and it reads the
    whole small source each epoch instead of failing; every rank's stream holds both sources."""
    from tests.loader.test_mixture import mix_file

    small = write_jsonl(tmp_path / "small.jsonl", [{"text": f"small {i} " * 10} for i in range(3)])
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": f"big {i} " * 10} for i in range(400)])
    path = mix_file(tmp_path, {"weight": 1, "local_path": str(big)},
                    {"weight": 1, "local_path": str(small), "stop": "cycle"}, by="documents")
    for rank in range(4):
        config = resolve_config(env={}, mix=path, tokenizer="byte", seq_len=64, batch_size=2, shard_mod=4,
                                shard_rem=rank)
        from fwe_cli.loader.stream import DocumentStream

        texts = [d.text for _, d in zip(range(40), DocumentStream(config))]
        assert any(t.startswith("small") for t in texts) and any(t.startswith("big") for t in texts), rank


def test_8_dataloader_workers_share_the_nodes_cores_within_the_loaders_cap(tmp_path, monkeypatch):
    """(8) 8 ranks of a 96-core node (LOCAL_WORLD_SIZE=8), 2 DataLoader workers each: a worker tokenizes on at most
    its share (the rank's budget, capped, over its workers), so the node runs at most 96 threads, not 768."""
    import fwe_cli.hostinfo as hostinfo
    from fwe_cli.loader.pipeline.encoding import MAX_AUTO_THREADS

    monkeypatch.setattr(hostinfo, "usable_cores", lambda: 96)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    corpus = write_corpus(tmp_path / "docs.jsonl", 20)
    dataset = FineWebDataset(_config(corpus, shard_mod=8, shard_rem=3))
    threads = dataset._pass_config(Shard(16, 7), 2, 0).tokenizer_threads
    assert threads == min(MAX_AUTO_THREADS, 96 // 8) // 2 and threads * 2 * 8 <= 96


def test_9_tensors_are_made_and_pinned_in_the_main_process_not_in_a_worker(tmp_path):
    """(9) as_torch=True: a worker's loader makes no tensors (its batches cross as bytes and arrive as tensors; a
    worker that pinned memory would initialise CUDA after a fork); without workers the loader makes them itself."""
    corpus = write_corpus(tmp_path / "docs.jsonl", 40)
    config = _config(corpus, as_torch=True)
    dataset = FineWebDataset(config)
    assert dataset._pass_config(Shard(2, 1), 2, 0).as_torch is False
    assert dataset._pass_config(Shard(), 0, 0).as_torch is True
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=1)))
    assert isinstance(batch, torch.Tensor) and batch.shape == (4, 16)


def test_11_one_numbering_and_one_state_for_every_adapter(tmp_path):
    """(11) Worker i of n on rank r is reader r·n + i for DataLoader workers and Grain workers alike (a rank's workers
    hold adjacent stretches of its share), and the DataLoader's, Grain's and torchtitan's states are one envelope."""
    grain_dataset = pytest.importorskip("fwe_cli.train.grain_dataset")
    assert worker_reader(Shard(3, 2), 4, 1) == grain_dataset.worker_shard(Shard(3, 2), slice(1, None, 4)) \
        == Shard(12, 9)
    corpus = write_corpus(tmp_path / "docs.jsonl", 40)
    config = _config(corpus)
    dataset_state = FineWebDataset(config).state_dict()
    grain_state = iter(grain_dataset.FineWebIterDataset(config)).get_state()
    assert State.from_envelope(dataset_state, "x") == State.from_envelope(grain_state, "x")


def test_a_world_of_dataloader_workers_resumes_on_another_with_every_document_once(tmp_path):
    """2 ranks of 2 DataLoader workers each take some batches and save their StatefulDataLoader states; 3 ranks of 2
    workers load every old rank's state (load_world) and read to the end: every document once over both worlds
    (batches of one token: each token delivered once)."""
    texts = documents(120)
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    one = resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=1, batch_size=1)
    tokens, states = [], []
    for rank, taken in enumerate([301, 177]):
        loader = StatefulDataLoader(FineWebDataset(one.replace(shard=Shard(2, rank))), batch_size=None,
                                    num_workers=2)
        it = iter(loader)
        tokens += [int(next(it)[0, 0]) for _ in range(taken)]
        states.append(orjson.loads(orjson.dumps(loader.state_dict())))
        del it, loader
    for rank in range(3):
        dataset = FineWebDataset(one.replace(shard=Shard(3, rank)))
        dataset.load_world(states)
        tokens += [int(b[0, 0]) for b in StatefulDataLoader(dataset, batch_size=None, num_workers=2)]
    delivered = sorted(tokens)
    expected = sorted(t for text in texts for t in list(text.encode()) + [256])
    assert delivered == expected

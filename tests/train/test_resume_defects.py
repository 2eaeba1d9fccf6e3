"""Resume through torch's DataLoader workers that cannot be wrong, as a user meets it: a worker whose share ended
resumes ended; a checkpoint with such a worker changes world; states of a pass set by set_epoch change world; the
Grain runbook describes the numbering the code deals by. Each test names the defect it guards, as the issue on one
state model numbers them (the plain loader's are in tests/loader/test_resume_defects.py)."""

from __future__ import annotations

import gzip
import pickle
import re

import numpy as np
import orjson
import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from fwe_cli.loader import FineWebDataset, resolve_config  # noqa: E402
from fwe_cli.loader.shard import Shard  # noqa: E402
from fwe_cli.train.state import worker_reader  # noqa: E402
from tests.helpers import REPO_ROOT, write_jsonl  # noqa: E402
from tests.train.corpus import documents  # noqa: E402

StatefulDataLoader = stateful.StatefulDataLoader


def uneven(tmp_path, gz_docs: int = 160, plain_docs: int = 40) -> tuple[str, list[str]]:
    """A .jsonl.gz (one unit: read whole by the reader whose stretch holds its start, and small for what it holds)
    and a .jsonl: two DataLoader workers get shares of very different lengths."""
    texts = documents(gz_docs + plain_docs)
    folder = tmp_path / "uneven"
    folder.mkdir()
    (folder / "a.jsonl.gz").write_bytes(gzip.compress(b"".join(orjson.dumps({"text": t}) + b"\n"
                                                               for t in texts[:gz_docs])))
    write_jsonl(folder / "b.jsonl", [{"text": t} for t in texts[gz_docs:]])
    return str(folder), texts


def _tokens(batches) -> list[int]:
    return [int(t) for b in batches for t in np.asarray(b).reshape(-1)]


def _expected(texts: list[str]) -> list[int]:
    return sorted(t for text in texts for t in list(text.encode()) + [256])


def test_1_a_worker_whose_share_ended_resumes_ended(tmp_path):
    """(1) 2 workers over uneven shares, a checkpoint 3 batches before the end (one worker's share has ended by
    then): the resumed DataLoader yields exactly those 3 batches, not the ended worker's share again."""
    path, _ = uneven(tmp_path)
    config = resolve_config(env={}, local_path=path, tokenizer="byte", seq_len=16, batch_size=4)
    whole = [np.asarray(b) for b in StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2)]
    loader = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2)
    it = iter(loader)
    for _ in range(len(whole) - 3):
        next(it)
    state = pickle.loads(pickle.dumps(loader.state_dict()))
    del it, loader
    resumed = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2)
    resumed.load_state_dict(state)
    rest = [np.asarray(b) for b in resumed]
    del resumed
    assert len(whole) > 30 and len(rest) == 3 and all(np.array_equal(a, b) for a, b in zip(rest, whole[-3:]))


def test_2_a_checkpoint_with_an_ended_worker_changes_world(tmp_path):
    """(2) The states of 2 ranks of 2 uneven workers each, taken late (a worker ended), dealt to 3 ranks of 2 workers
    with load_world: no refusal, and every token of every document delivered once over both worlds."""
    path, texts = uneven(tmp_path, 50, 14)
    one = resolve_config(env={}, local_path=path, tokenizer="byte", seq_len=1, batch_size=1)
    tokens, states = [], []
    for rank in range(2):
        config = one.replace(shard=Shard(2, rank))
        whole = sum(1 for _ in StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2))
        loader = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=2)
        it = iter(loader)
        tokens += _tokens(next(it) for _ in range(whole - 20))
        states.append(orjson.loads(orjson.dumps(loader.state_dict())))
        del it, loader
    for rank in range(3):
        dataset = FineWebDataset(one.replace(shard=Shard(3, rank)))
        dataset.load_world(states)
        tokens += _tokens(StatefulDataLoader(dataset, batch_size=None, num_workers=2))
    assert sorted(tokens) == _expected(texts)


def test_4_states_of_a_pass_set_by_set_epoch_change_world_in_that_pass(tmp_path):
    """(4) 2 ranks shuffled with seed 5, set_epoch(2), stop partway; 3 new ranks load their states (load_world): the
    states are dealt in the pass they were saved in, taken from them (no "saved with shuffle_seed=7" refusal: a pass
    is the loader's epoch, not another seed), every token of that epoch delivered once over both worlds."""
    texts = documents(48)
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    one = resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=1, batch_size=1, shuffle_seed=5,
                         shuffle_window=8)
    tokens, states = [], []
    for rank, taken in enumerate((700, 311)):
        dataset = FineWebDataset(one.replace(shard=Shard(2, rank)))
        dataset.set_epoch(2)
        loader = StatefulDataLoader(dataset, batch_size=None)
        it = iter(loader)
        tokens += _tokens(next(it) for _ in range(taken))
        states.append(pickle.loads(pickle.dumps(loader.state_dict())))
    for rank in range(3):
        dataset = FineWebDataset(one.replace(shard=Shard(3, rank)))
        dataset.load_world(states)
        tokens += _tokens(StatefulDataLoader(dataset, batch_size=None))
    assert sorted(tokens) == _expected(texts)


def test_9_the_grain_runbook_describes_the_numbering_the_code_deals_by():
    """(9) runbooks/train.md's Grain section says worker i of n on rank r of w is reader r·n + i of w·n, reading its
    own stretch (what worker_shard and worker_reader deal), not a round robin of documents."""
    from fwe_cli.train.grain_dataset import worker_shard

    text = (REPO_ROOT / "runbooks" / "train.md").read_text()
    section = text[text.index("## Grain"):]
    section = section[:section.index("```")]
    assert "reader `r·n + i` of `w·n`" in section and "stretch" in section
    assert not re.search(r"d\s*%|round.robin", section)
    for world, rank, workers, worker in ((1, 0, 2, 1), (3, 2, 4, 1), (2, 1, 12, 11)):
        expected = Shard(world * workers, rank * workers + worker)
        assert worker_shard(Shard(world, rank), slice(worker, None, workers)) == expected
        assert worker_reader(Shard(world, rank), workers, worker) == expected

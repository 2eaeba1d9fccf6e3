"""torchdata's own resume pattern (its test_state_dict.py), run over FineWebDataset on three uneven files: iterate,
take the StatefulDataLoader's state_dict() after N batches, drain; a new DataLoader loaded with that state must yield
exactly the drained rest. Every combination of num_workers 0 and 3, persistent workers or not, snapshot every 1, 2
and 5 steps, a shuffle or none, and interrupts at 0, 1, 10 and 3 batches before the end."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import orjson
import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from fwe_cli.loader import FineWebDataset, resolve_config  # noqa: E402
from tests.helpers import write_jsonl  # noqa: E402
from tests.train.corpus import documents  # noqa: E402

StatefulDataLoader = stateful.StatefulDataLoader
LAYOUTS = [(0, False), (3, False), (3, True)]


@pytest.fixture(scope="module")
def three_uneven(tmp_path_factory) -> str:
    """A .jsonl.gz (read whole by one reader), a long .jsonl and a short .txt."""
    folder = tmp_path_factory.mktemp("uneven")
    texts = documents(150)
    (folder / "a.jsonl.gz").write_bytes(gzip.compress(b"".join(orjson.dumps({"text": t}) + b"\n"
                                                               for t in texts[:70])))
    write_jsonl(folder / "b.jsonl", [{"text": t} for t in texts[70:135]])
    (folder / "c.txt").write_text("".join(t + "\n" for t in texts[135:]), encoding="utf-8")
    return str(folder)


def _loader(config, workers: int, persistent: bool, snapshot: int):
    extra = {"persistent_workers": persistent} if workers else {}
    return StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=workers,
                              snapshot_every_n_steps=snapshot, **extra)


@pytest.mark.parametrize("shuffle", [None, 3])
@pytest.mark.parametrize("snapshot", [1, 2, 5])
@pytest.mark.parametrize("workers, persistent", LAYOUTS)
def test_a_state_after_n_batches_resumes_exactly_the_rest(three_uneven, workers, persistent, snapshot, shuffle):
    """For interrupts at 0, 1, 10 and 3 batches before the end of one pass: the state taken there (pickled, as
    torch.save carries it) loaded into a new DataLoader yields exactly the rest of the uninterrupted pass."""
    kw = {} if shuffle is None else {"shuffle_seed": shuffle, "shuffle_window": 8}
    config = resolve_config(env={}, local_path=three_uneven, tokenizer="byte", seq_len=16, batch_size=4, **kw)
    loader = _loader(config, workers, persistent, snapshot)
    whole, states = [], {}
    it = iter(loader)
    cut_late = None
    while True:
        if len(whole) in (0, 1, 10):
            states[len(whole)] = pickle.dumps(loader.state_dict())
        try:
            whole.append(np.asarray(next(it)))
        except StopIteration:
            break
    del it, loader
    cut_late = len(whole) - 3  # (a second pass takes its state 3 batches before the end)
    loader = _loader(config, workers, persistent, snapshot)
    it = iter(loader)
    for _ in range(cut_late):
        next(it)
    states[cut_late] = pickle.dumps(loader.state_dict())
    del it, loader
    assert len(whole) > 40
    for taken, state in sorted(states.items()):
        resumed = _loader(config, workers, persistent, snapshot)
        resumed.load_state_dict(pickle.loads(state))
        rest = [np.asarray(b) for b in resumed]
        del resumed
        assert len(rest) == len(whole) - taken, (taken, len(rest))
        assert all(np.array_equal(a, b) for a, b in zip(rest, whole[taken:])), taken

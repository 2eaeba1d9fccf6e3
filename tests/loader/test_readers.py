"""Every document exactly once, decoded from what readers delivered: readers are dealt their own units before they
read (sources.deal), so 3 ranks (in order or shuffled), 3 DataLoader workers, 2 ranks resumed on 3 and a 0.7/0.3 mix
on 3 ranks each deliver every document of the data once, none twice, token for token. Batches of one token: every
token of a stream is delivered, so a reader's tokens, split at the end-of-text ids, are its documents."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.shard import Shard
from tests.helpers import write_jsonl
from tests.loader.delivered import each_document_once, pieces
from tests.loader.test_mixture import mix_file

DOCS = [f"<{i:03d}>" + "abcdefghij"[: 1 + i % 10] * (2 + i % 5) + f"</{i:03d}>" for i in range(150)]


@pytest.fixture()
def corpus(tmp_path):
    """The documents in two JSONL files (a reader's share may span both)."""
    write_jsonl(tmp_path / "a.jsonl", [{"text": t} for t in DOCS[:90]])
    write_jsonl(tmp_path / "b.jsonl", [{"text": t} for t in DOCS[90:]])
    return tmp_path


def _config(path, readers: int = 1, reader: int = 0, **kw):
    return resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=1, batch_size=1,
                          shard_mod=readers, shard_rem=reader, **kw)


def _tokens(loader, limit: int | None = None) -> list[int]:
    out = []
    for batch in loader:
        out.append(int(np.asarray(batch).reshape(-1)[0]))
        if len(out) == limit:
            break
    return out


@pytest.mark.parametrize("shuffle", [None, 5])
def test_three_ranks_deliver_every_document_once(corpus, shuffle):
    """3 ranks to the end of the epoch, in order and shuffled (windows of 8): each document once over the three."""
    kw = {} if shuffle is None else {"shuffle_seed": shuffle, "shuffle_window": 8}
    streams = []
    for rank in range(3):
        with FineWebLoader(_config(corpus, 3, rank, **kw)) as loader:
            streams.append(_tokens(loader))
    each_document_once(DOCS, streams)
    if shuffle is not None:  # and each rank's documents are its own, in a shuffled order
        assert any(pieces(s)[0] != sorted(pieces(s)[0]) for s in streams)


def test_three_dataloader_workers_deliver_every_document_once(corpus):
    """One rank, StatefulDataLoader(num_workers=3): the workers are readers 0..2 of 3 (rank x workers): the batches
    are theirs in turn, and together each document once."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from fwe_cli.loader import FineWebDataset
    from tests.train.corpus import round_robin

    got = [int(b.reshape(-1)[0]) for b in stateful.StatefulDataLoader(FineWebDataset(_config(corpus)),
                                                                        batch_size=None, num_workers=3)]
    workers = []
    for worker in range(3):
        with FineWebLoader(_config(corpus, 3, worker)) as loader:
            workers.append(_tokens(loader))
    assert got == round_robin(workers)
    each_document_once(DOCS, workers)


@pytest.mark.parametrize("shuffle", [None, 7])
def test_two_ranks_stopped_mid_epoch_resume_on_three_delivering_every_document_once(corpus, shuffle):
    """2 ranks take 200 and 333 one-token batches (each stops inside a document) and save; 3 ranks given both states
    read to the end: every document once over both worlds, a cut one finished by a new rank."""
    kw = {} if shuffle is None else {"shuffle_seed": shuffle, "shuffle_window": 8}
    first, states = [], []
    for rank, taken in enumerate([200, 333]):
        with FineWebLoader(_config(corpus, 2, rank, **kw)) as loader:
            first.append(_tokens(loader, taken))
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    assert all(pieces(tokens)[1] for tokens in first)  # both stopped inside a document
    second = []
    for rank in range(3):
        with FineWebLoader(_config(corpus, 3, rank, **kw), state=states) as loader:
            second.append(_tokens(loader))
    each_document_once(DOCS, first, second)


def test_a_mix_on_three_ranks_delivers_each_document_at_most_once_and_its_shares_whole(tmp_path):
    """A 0.7/0.3 mix by documents of two sources on 3 ranks, each rank to the end of its mix: no document twice over
    the ranks; each rank's documents of each source are the first of its own share of that source (none skipped),
    the source that ended its mix delivered whole; the shares come out near 0.7/0.3."""
    a = [t for t in DOCS[:105]]
    b = [t.replace("<", "[").replace(">", "]") for t in DOCS[105:]]  # told apart from a's by their brackets
    write_jsonl(tmp_path / "a.jsonl", [{"text": t} for t in a])
    write_jsonl(tmp_path / "b.jsonl", [{"text": t} for t in b])
    path = mix_file(tmp_path, {"weight": 0.7, "local_path": str(tmp_path / "a.jsonl")},
                    {"weight": 0.3, "local_path": str(tmp_path / "b.jsonl")}, by="documents")
    seen: list[str] = []
    for rank in range(3):
        config = resolve_config(env={}, mix=path, tokenizer="byte", seq_len=1, batch_size=1, shard_mod=3,
                                shard_rem=rank)
        with FineWebLoader(config) as loader:
            got, _ = pieces(_tokens(loader))
        shares = [[d.text for d in _share(tmp_path / name, rank)] for name in ("a.jsonl", "b.jsonl")]
        mine = [[d for d in got if d in own] for own in shares]
        assert all(taken == share[:len(taken)] for taken, share in zip(mine, shares))
        assert any(taken == share for taken, share in zip(mine, shares))  # the one that ended it: whole
        assert abs(len(mine[0]) / len(got) - 0.7) < 0.05
        seen += got
    assert len(seen) == len(set(seen)) > 100


def _share(path, rank: int):
    from fwe_cli.loader.stream import DocumentStream

    return DocumentStream(resolve_config(env={}, local_path=str(path)).replace(shard=Shard(3, rank)))

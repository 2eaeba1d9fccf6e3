"""The seeded shuffle: a pure function of (seed, epoch, data, readers): the same order on any Q, doc batch, threads;
one epoch is a permutation of the unshuffled documents; readers take disjoint parts of the epoch's permuted units;
epochs repeat the data in a new order."""

from __future__ import annotations

import numpy as np
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.stream import DocumentStream
from tests.helpers import write_jsonl


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three JSONL files, 90 documents with unique ids."""
    root = tmp_path_factory.mktemp("shuffle")
    docs = [synthetic_record(9, i) for i in range(90)]
    for n in range(3):
        write_jsonl(root / f"part{n}.jsonl", docs[30 * n:30 * (n + 1)])
    return root


def ids(corpus, **kw):
    return [d.id for d in DocumentStream(resolve_config(env={}, local_path=str(corpus), **kw))]


def test_one_epoch_is_a_permutation_of_the_unshuffled_documents(corpus):
    """With a seed the documents of an epoch are exactly the unshuffled ones, in another order; without, in order."""
    plain = ids(corpus)
    shuffled = ids(corpus, shuffle_seed=3, shuffle_window=16)
    assert len(plain) == 90 and sorted(shuffled) == sorted(plain) and shuffled != plain


def test_same_seed_same_order_other_seed_other_order(corpus):
    """The order is a function of the seed: the same twice, another for another seed."""
    assert ids(corpus, shuffle_seed=3, shuffle_window=16) == ids(corpus, shuffle_seed=3, shuffle_window=16)
    assert ids(corpus, shuffle_seed=3, shuffle_window=16) != ids(corpus, shuffle_seed=4, shuffle_window=16)


def test_shards_are_disjoint_parts_of_the_epoch(corpus):
    """Readers 0 and 1 of 2 under a shuffle each read their own stretch of the epoch's permuted units, in windows
    shuffled their own way: disjoint, together every document once, each reader's documents shuffled."""
    parts = [ids(corpus, shuffle_seed=3, shuffle_window=16, shard_mod=2, shard_rem=r) for r in (0, 1)]
    plain = ids(corpus)
    assert not set(parts[0]) & set(parts[1]) and sorted(parts[0] + parts[1]) == sorted(plain)
    assert all(part != sorted(part, key=plain.index) for part in parts)


def test_epochs_repeat_the_data_each_in_its_own_order(corpus):
    """epochs=2 yields every document twice, the second epoch a different permutation of the same documents."""
    both = ids(corpus, shuffle_seed=3, shuffle_window=16, epochs=2)
    first, second = both[:90], both[90:]
    assert len(both) == 180 and sorted(first) == sorted(second) and first != second
    assert ids(corpus, epochs=2) == ids(corpus) * 2


@pytest.mark.parametrize("knobs", [dict(queue_depth=1, doc_batch=1, tokenizer_threads=1, prefetch=False),
                                   dict(queue_depth=8, doc_batch=64, tokenizer_threads=2)])
def test_shuffled_batches_do_not_depend_on_q_doc_batch_or_threads(corpus, knobs):
    """The batches of a shuffled run are the same whatever the queue depth, doc batch, prefetch or threads."""
    def batches(**kw):
        config = resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=512, batch_size=4,
                                shuffle_seed=5, shuffle_window=20, **kw)
        with FineWebLoader(config) as loader:
            return np.stack([np.array(b) for b in loader])

    assert np.array_equal(batches(queue_depth=2, doc_batch=7), batches(**knobs))


def test_shuffle_is_refused_with_the_datasets_reader():
    """The datasets Hub reader is the stream-order reference: a shuffle with it is a usage error naming both."""
    with pytest.raises(ConfigError, match="--shuffle-seed needs the native Hub reader"):
        resolve_config(env={}, source="hub", hub_reader="datasets", shuffle_seed=1)

"""The batch stream is exactly tokenizer(doc0) + sep + tokenizer(doc1) + sep + ..., in the reader's order, and does not
depend on prefetch, doc batch, queue depth or tokenizer threads; readers split the stream into contiguous shares."""

import numpy as np
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer


def pull(config, n):
    with FineWebLoader(config) as loader:
        out = [next(loader) for _ in range(n)]
    return np.stack(out)


def expected_stream(docs, tokenizer, n_tokens):
    ids = []
    for doc in docs:
        ids += tokenizer.encode(doc.text)
        ids.append(tokenizer.eos_id)
        if len(ids) >= n_tokens:
            return np.array(ids[:n_tokens], dtype=np.int32)
    raise AssertionError("not enough documents")


@pytest.fixture(params=["byte", "gpt2"])
def tokenizer_spec(request, gpt2_tokenizer_json):
    return "byte" if request.param == "byte" else gpt2_tokenizer_json


def test_gpt2_tokenizer_matches_reference_ids(gpt2_tokenizer_json):
    """The GPT-2 tokenizer built offline is the real one: 'Hello world' -> [15496, 995], eos 50256."""
    tok = load_tokenizer(gpt2_tokenizer_json)
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.eos_id == 50256 and tok.vocab_size == 50257


@pytest.mark.parametrize("shard", [(1, 0), (3, 2)])
def test_stream_is_concatenation_of_documents_in_shard_order(tokenizer_spec, synthetic_jsonl, shard):
    """Flattened batches == encode(doc_i) + [eos] for the reader's docs, in order (local JSONL source)."""
    mod, rem = shard
    cfg = resolve_config(env={}, local_path=str(synthetic_jsonl), tokenizer=tokenizer_spec, seq_len=128,
                         batch_size=4, doc_batch=5, shard_mod=mod, shard_rem=rem)
    batches = pull(cfg, 6)
    docs = list(DocumentStream(cfg))
    expect = expected_stream(docs, load_tokenizer(tokenizer_spec), batches.size)
    assert np.array_equal(batches.reshape(-1), expect)


VARIANTS = [
    dict(prefetch=False, doc_batch=1, queue_depth=1, tokenizer_threads=1),
    dict(prefetch=True, doc_batch=7, queue_depth=1, tokenizer_threads=2),
    dict(prefetch=True, doc_batch=128, queue_depth=8, tokenizer_threads=3),
    dict(prefetch=False, doc_batch=128, queue_depth=8, tokenizer_threads=1),
    dict(prefetch=True, doc_batch=1, queue_depth=8, tokenizer_threads=4),
]


@pytest.mark.parametrize("source", ["synthetic", "local"])
def test_batches_identical_across_prefetch_doc_batch_queue_and_threads(tokenizer_spec, synthetic_jsonl, source):
    """Every combination of prefetch on/off, doc_batch 1/7/128, Q 1/8 and 1-4 threads yields the same batches."""
    local = str(synthetic_jsonl) if source == "local" else None
    results = [
        pull(resolve_config(env={}, source=source, local_path=local, tokenizer=tokenizer_spec, seq_len=256,
                            batch_size=2, **variant), 8)
        for variant in VARIANTS
    ]
    assert len({r.tobytes() for r in results}) == 1
    assert len(np.unique(results[0])) > 20  # real text, not a constant


def test_shards_partition_the_stream(synthetic_jsonl):
    """Readers 0..3 of 4 each hold a contiguous stretch of the unsharded stream, and together every document of it
    exactly once, in order."""
    base = resolve_config(env={}, local_path=str(synthetic_jsonl))
    whole = [d.id for d in DocumentStream(base)]
    parts = [[d.id for d in DocumentStream(base.replace(shard=Shard(4, r)))] for r in range(4)]
    assert sum(parts, []) == whole and len(whole) == 200
    assert all(40 <= len(part) <= 60 for part in parts)  # about a quarter of the bytes each


def test_synthetic_shards_partition_the_stream():
    """The synthetic stream split four ways gives reader r the records from r/4 of its epoch on: disjoint, each in
    the order of the whole stream."""
    from itertools import islice

    from fwe_cli.loader.files.synthetic import EPOCH_RECORDS, _id

    base = resolve_config(env={}, source="synthetic", seed=3)
    parts = [[d.id for d in islice(DocumentStream(base.replace(shard=Shard(4, r))), 10)] for r in range(4)]
    assert parts == [[_id(3, r * EPOCH_RECORDS // 4 + i) for i in range(10)] for r in range(4)]


def test_nothing_dropped_but_final_partial_batch(synthetic_jsonl):
    """Over a finite file, emitted tokens == all tokens minus (total % batch tokens): nothing lost mid-stream."""
    tok = load_tokenizer("byte")
    docs = list(DocumentStream(resolve_config(env={}, local_path=str(synthetic_jsonl))))
    total = sum(len(d.text.encode()) + 1 for d in docs)
    cfg = resolve_config(env={}, local_path=str(synthetic_jsonl), tokenizer="byte", seq_len=500, batch_size=3)
    with FineWebLoader(cfg) as loader:
        batches = list(loader)
    emitted = sum(b.size for b in batches)
    assert emitted == total - total % 1500
    assert np.array_equal(np.concatenate([b.reshape(-1) for b in batches]), expected_stream(docs, tok, emitted))


def test_a_synthetic_shard_generates_only_its_own_documents(monkeypatch):
    """Reader 1 of 4 of the synthetic stream makes the text of its own documents only, so N ranks share the
    generation work instead of each doing all of it."""
    from itertools import islice

    from fwe_cli.loader.config import resolve_config
    from fwe_cli.loader.files import synthetic

    made: list[int] = []
    original = synthetic._text_of
    monkeypatch.setattr(synthetic, "_text_of", lambda seed, index: made.append(index) or original(seed, index))
    docs = [d.text for d in islice(DocumentStream(resolve_config(env={}, source="synthetic", shard_mod=4,
                                                                 shard_rem=1)), 10)]
    first = synthetic.EPOCH_RECORDS // 4
    assert len(docs) == 10 and made == list(range(first, first + 10))

"""Defects of the loader core found in review, each kept fixed: a state saved with a full queue of one-document
batches still names the document its batch ended in; `load_state_dict` restarts a loader as a fresh one would
(the Hub read-ahead gate opens again, the old tokenizer threads end, a closed loader refuses); a warm Hub start counts
each document it reads once; a stream's source is made once when two threads ask for it together."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from fwe_cli.errors import LoaderError
from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.hub.first_batches import FIRST_BATCHES


def test_a_full_queue_of_one_document_batches_still_records_the_document_a_batch_ended_in():
    """Synthetic, byte, 8x1024, Q 8, doc batch 1: with the queue full (a warmup of 8 batches) the state after a
    batch has the document it ended in (`ended`), and a world of 2 resumes it (each rank takes its share)."""
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=1024, batch_size=8, queue_depth=8,
                            doc_batch=1, warmup_batches=8, warmup_timeout=60)
    with FineWebLoader(config) as loader:
        for _ in range(3):
            loader.next_batch()
        assert loader.warmup_report["filled"] == 8
        state = orjson.loads(orjson.dumps(loader.state_dict()))
    assert state["ended"][0]["type"] == "cursor" and state["status"] == "at"
    for rem in range(2):
        other = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=1024, batch_size=8,
                               shard_mod=2, shard_rem=rem)
        with FineWebLoader(other, state=[state]) as loader:
            assert loader.next_batch().shape == (8, 1024)


def _hub_config(**overrides):
    settings = dict(source="hub", hub_reader="native", tokenizer="byte", seq_len=256, batch_size=2,
                    tokenizer_threads=2, doc_batch=2, hub_cache=False)
    return resolve_config(env={}, **{**settings, **overrides})


def test_load_state_dict_opens_the_hub_read_ahead_again_and_ends_the_old_tokenizer_threads(hub_env):
    """After `load_state_dict`, the consumer's second batch opens the Hub reader's read-ahead gate (as for a fresh
    loader), the tokenizer threads of the pipeline it replaced have ended, and the batches are the state's."""
    with FineWebLoader(_hub_config()) as loader:
        whole = [np.array(loader.next_batch()) for _ in range(6)]
    with FineWebLoader(_hub_config()) as loader:
        loader.next_batch()
        state = loader.state_dict()
        for _ in range(3):
            loader.next_batch()
        old_pool = loader.pipeline._pool
        assert old_pool is not None and old_pool._threads
        loader.load_state_dict(state)
        assert not any(thread.is_alive() for thread in old_pool._threads)
        rest = [np.array(loader.next_batch()) for _ in range(2)]
        assert loader.pipeline.documents.opened._reader._open  # the gate: read ahead freely from the second batch
    assert all(np.array_equal(a, b) for a, b in zip(whole[1:3], rest, strict=True))


def test_load_state_dict_on_a_closed_loader_refuses_and_starts_nothing():
    """A closed loader does not come back to life: load_state_dict raises and no producer thread is started."""
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=128, batch_size=1)
    loader = FineWebLoader(config)
    loader.next_batch()
    state = loader.state_dict()
    loader.close()
    pipeline = loader.pipeline
    with pytest.raises(LoaderError, match="closed loader"):
        loader.load_state_dict(state)
    assert loader.pipeline is pipeline and not loader.producer_alive


def test_a_warm_hub_start_counts_each_document_once(hub_env):
    """Read to its end, a warm start that replayed kept batches reports as many documents as the cold start that
    kept them (the kept batches' documents are not counted again when the stream goes on after them)."""
    def read_all():
        with FineWebLoader(_hub_config(tokenizer="gpt2", prefetch=False, hub_cache=True)) as loader:
            batches = sum(1 for _ in loader)
            return batches, loader.stats()

    cold_batches, cold = read_all()
    warm_batches, warm = read_all()
    assert warm["source"]["first_batches"]["replayed"] == FIRST_BATCHES < cold_batches == warm_batches
    assert warm["docs"] == cold["docs"] and warm["tokens_produced"] == cold["tokens_produced"]


def test_the_source_is_made_once_when_the_consumer_and_the_producer_ask_together(tmp_path, monkeypatch):
    """A state taken before the first batch (the consumer's thread) and the producer's opening both ask the stream
    for its source: 8 threads asking at once get one object, made once (two would leave the state summarizing a
    source that never opened: "0 files then" on resume)."""
    import threading

    from fwe_cli.loader import stream as stream_module
    from fwe_cli.loader.stream import DocumentStream

    made = []
    real = stream_module.open_source

    def slow_open(spec, options):  # a wide window between the check and the assignment
        made.append(1)
        threading.Event().wait(0.05)
        return real(spec, options)

    monkeypatch.setattr(stream_module, "open_source", slow_open)
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "a"}\n')
    stream = DocumentStream(resolve_config(env={}, local_path=str(path), tokenizer="byte"))
    start, got = threading.Barrier(8), []

    def ask():
        start.wait()
        got.append(stream.source)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len({id(s) for s in got}) == 1

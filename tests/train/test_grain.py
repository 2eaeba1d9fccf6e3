"""fwe as a Grain dataset: its iterators resume exactly from `get_state()` (in a fresh process, under mp_prefetch
worker processes too), each worker reads its own documents of its rank's, and worker processes end with the
iterator."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import numpy as np
import orjson
import pytest

grain = pytest.importorskip("grain")

from fwe_cli.errors import ConfigError  # noqa: E402
from fwe_cli.loader import FineWebLoader, resolve_config  # noqa: E402
from fwe_cli.loader.shard import Shard  # noqa: E402
from fwe_cli.train.grain_dataset import FineWebIterDataset, worker_shard  # noqa: E402
from tests.helpers import REPO_ROOT, fwe_env  # noqa: E402
from tests.train.grain_pipeline import pipeline, take  # noqa: E402


def tiny(**changes):
    """Synthetic documents, byte tokenizer, 2 rows of 32 tokens."""
    return resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=32, batch_size=2).replace(**changes)


def loader_batches(config, n: int) -> list[np.ndarray]:
    with FineWebLoader(config) as loader:
        return [np.array(loader.next_batch()) for _ in range(n)]


def test_two_mp_prefetch_workers_resume_from_get_state_in_a_fresh_process(tmp_path):
    """A Grain pipeline over fwe with 2 mp_prefetch workers: the `get_state()` taken after 10 batches, sent through
    JSON to a fresh process, continues there with the batches the first process got after it (11-15)."""
    config = tiny()
    iterator = iter(pipeline(config))
    try:
        take(iterator, 10)
        state = iterator.get_state()
        expected = take(iterator, 5)
    finally:
        iterator.close()
    (tmp_path / "config.json").write_bytes(orjson.dumps(config.to_json()))
    (tmp_path / "state.json").write_bytes(orjson.dumps(state))
    proc = subprocess.run([sys.executable, "-m", "tests.train.grain_pipeline", str(tmp_path / "config.json"),
                           str(tmp_path / "state.json"), str(tmp_path / "out.npy"), "5"],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=fwe_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = np.load(tmp_path / "out.npy")
    assert resumed.shape == (5, 2, 32)
    assert all(np.array_equal(a, b) for a, b in zip(resumed, expected))


def test_each_worker_reads_its_own_documents_of_its_rank():
    """Rank 1 of 2 with 2 workers: worker i is reader 2 + i of 4 (rank × workers + worker: train.state), so the
    pipeline's batches are those two readers' batches in turn, and no document is read by two workers; the worker
    processes are gone once the iterator is closed."""
    config = tiny(shard=Shard(2, 1))
    before = set(multiprocessing.active_children())
    iterator = iter(pipeline(config))
    try:
        got = take(iterator, 8)
        assert len(set(multiprocessing.active_children()) - before) == 2  # the two workers
    finally:
        iterator.close()
    assert set(multiprocessing.active_children()) - before == set()  # close() joined them (active_children reaps)
    first = loader_batches(config.replace(shard=Shard(4, 2)), 4)
    second = loader_batches(config.replace(shard=Shard(4, 3)), 4)
    expected = [batch for pair in zip(first, second) for batch in pair]
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 7])
def test_an_iterator_resumes_exactly_at_any_batch(k):
    """In one process, without workers: the state after k batches (k = 0 too: taken before the loader starts) set on
    a new iterator gives the batches that followed it, identical to a plain FineWebLoader's."""
    dataset = FineWebIterDataset(tiny())
    whole = loader_batches(tiny(), 10)
    first = iter(dataset)
    assert [np.array_equal(next(first), b) for b in whole[:k]] == [True] * k
    state = orjson.loads(orjson.dumps(first.get_state()))
    first.close()
    second = iter(dataset)
    second.set_state(state)
    assert all(np.array_equal(next(second), b) for b in whole[k:])
    second.close()


def test_rows_feed_grains_own_batch_and_resume_in_the_middle_of_a_batch():
    """With rows=True the elements are fwe's rows in order (Grain's `.batch()` groups them); a state taken in the middle
    of one of fwe's batches resumes at the next row."""
    config = tiny(batch_size=3)
    rows = np.concatenate(loader_batches(config, 4))  # 12 rows
    dataset = FineWebIterDataset(config, rows=True).batch(2)
    first = iter(dataset)
    head = [next(first) for _ in range(4)]  # 8 rows: two rows into fwe's third batch
    state = first.get_state()
    tail = [next(first) for _ in range(2)]
    first.close()
    assert np.array_equal(np.concatenate(head + tail), rows)
    second = iter(dataset)
    second.set_state(state)
    assert np.array_equal(np.concatenate([next(second) for _ in range(2)]), rows[8:])
    second.close()


@pytest.mark.parametrize("taken", [0, 1])
def test_a_state_of_another_worker_layout_is_refused_naming_both(taken):
    """A worker's state set on a worker of another layout (3 workers instead of 2) is refused, naming both layouts,
    instead of reading another worker's documents: one taken after a batch, or before the loader started."""
    saved = FineWebIterDataset(tiny())
    saved.set_slice(slice(1, None, 2))
    first = iter(saved)
    for _ in range(taken):
        next(first)
    state = first.get_state()
    first.close()
    other = FineWebIterDataset(tiny())
    other.set_slice(slice(1, None, 3))
    second = iter(other)
    with pytest.raises(ConfigError, match="worker 1 of 2 of rank 0 of 1.*worker 1 of 3 of rank 0 of 1"):
        second.set_state(state)
    second.close()


def test_worker_slices_compose_with_the_rank_shard_and_odd_slices_are_refused():
    """Worker i of n on reader Shard(mod, rem) is Shard(mod·n, rem·n + i); a slice that is not one worker's (a stop,
    a start past the step) is a ConfigError naming it; so is a LoaderConfig with as_torch."""
    assert worker_shard(Shard(3, 2), slice(1, None, 4)) == Shard(12, 9)
    assert worker_shard(Shard(), slice(None)) == Shard()
    for bad in (slice(0, 10, 2), slice(2, None, 2)):
        with pytest.raises(ConfigError, match="slice"):
            worker_shard(Shard(), bad)
    with pytest.raises(ConfigError, match="as_torch"):
        FineWebIterDataset(tiny(as_torch=True))


def test_a_sliced_dataset_tells_its_loader_the_workers_of_its_rank():
    """Grain's worker i of n reads as worker i of n of its rank: its config's shard is that worker's and its workers
    n (what a mix's schedule reads the rank's step by: worker i's batch k is the rank's k x n + i)."""
    dataset = FineWebIterDataset(tiny(shard=Shard(3, 2)))
    dataset.set_slice(slice(1, None, 4))
    assert (dataset.config.shard, dataset.config.workers) == (Shard(12, 9), 4)


def test_fwe_imports_no_grain_unless_asked():
    """Importing fwe's loader and the train package does not import grain (slow, and an optional extra)."""
    code = ("import sys, fwe_cli.loader, fwe_cli.train; from fwe_cli.loader import FineWebLoader; "
            "print('grain' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, env=fwe_env(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_the_runbooks_grain_section_runs_as_written(tmp_path):
    """Every block of runbooks/train.md's Grain section runs as written; its resumed run (a fresh process, from the
    checkpoint after step 5) prints the first run's steps 6-10, token for token."""
    from tests.train.runbook_sections import check_resumes_after_step_5

    check_resumes_after_step_5("Grain", tmp_path, "train_grain.py")

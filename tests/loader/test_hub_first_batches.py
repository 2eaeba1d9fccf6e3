"""A warm native Hub start hands over the first batches an earlier run kept (hub.first_batches): the same
batches as a cold start, the stream going on exactly after them, a resume state after any of them exact; and any
change of what the batches depend on misses. Loaders in this process, against the test Hub (hub_env)."""

from __future__ import annotations

import threading

import numpy as np
import orjson
import pytest

from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.hub.first_batches import FIRST_BATCHES
from fwe_cli.loader.hub.head_cache import HeadCache

SETTINGS = dict(source="hub", hub_reader="native", tokenizer="gpt2", seq_len=256, batch_size=2)


def config(**overrides):
    return resolve_config(env={}, **{**SETTINGS, **overrides})


def pull(n: int, state=None, **overrides) -> tuple[list[np.ndarray], dict, dict]:
    """(n batches, the loader's source record, its state after them) of a fresh loader."""
    with FineWebLoader(config(**overrides), state=state) as loader:
        batches = [np.array(loader.next_batch()) for _ in range(n)]
        return batches, loader.stats()["source"], loader.state_dict()


def test_a_warm_start_replays_the_kept_batches_and_goes_on_exactly_after_them(hub_env):
    """The cold loader keeps its first batches; the warm one hands them over from the cache (one request: the
    listing's HEAD) and then makes the ones after them itself: all equal to the cold loader's, batch for batch."""
    cold, cold_source, _ = pull(FIRST_BATCHES + 2)
    assert cold_source["first_batches"] == {"replayed": 0, "kept": FIRST_BATCHES}
    hub_env.new_log("warm")
    warm, warm_source, _ = pull(FIRST_BATCHES + 2)
    assert warm_source["first_batches"]["replayed"] == FIRST_BATCHES
    assert all(np.array_equal(a, b) for a, b in zip(cold, warm, strict=True))


@pytest.mark.parametrize("after", [1, FIRST_BATCHES])
def test_a_state_saved_after_a_replayed_batch_resumes_exactly(hub_env, after):
    """A state saved after replayed batch `after` equals the cold loader's at the same batch (the document the
    batch ended in included), and a loader resumed from it gives the cold loader's next batches."""
    cold, _, _ = pull(FIRST_BATCHES + 2)
    _, _, cold_state = pull(after, hub_cache=False)
    warm, source, state = pull(after)
    assert source["first_batches"]["replayed"] == FIRST_BATCHES
    assert orjson.loads(orjson.dumps(state)) == orjson.loads(orjson.dumps(cold_state))  # as a JSON file holds it
    assert state["status"] == "at" and state["ended"] is not None
    resumed, _, _ = pull(2, state=state)
    assert all(np.array_equal(a, b) for a, b in zip(cold[after:after + 2], resumed, strict=True))


@pytest.mark.parametrize("change", [dict(seq_len=128), dict(batch_size=3), dict(shard_mod=2, shard_rem=1),
                                    dict(tokenizer="byte")])
def test_any_change_of_what_the_batches_depend_on_misses(hub_env, change):
    """Kept batches of one shape, shard or tokenizer are never handed to a loader of another: it makes its own,
    equal to an uncached loader's with its settings."""
    pull(2)
    fresh, _, _ = pull(2, hub_cache=False, **change)
    got, source, _ = pull(2, **change)
    assert source["first_batches"]["replayed"] == 0
    assert all(np.array_equal(a, b) for a, b in zip(fresh, got, strict=True))


def test_close_returns_within_its_bound_while_a_kept_batches_write_is_stuck(hub_env, monkeypatch):
    """A write of the kept batches that cannot end (its head-cache put waits on an event) does not hold
    close(join_timeout): close returns while that write is still blocked; released, the write ends."""
    join_s, margin_s = 0.5, 10.0  # margin: an upper bound for a loaded machine, not a measurement
    entered, release = threading.Event(), threading.Event()
    put_entry = HeadCache.put_entry

    def blocked_put(self, name: str, data: bytes) -> bool:
        entered.set()
        release.wait()
        return put_entry(self, name, data)

    monkeypatch.setattr(HeadCache, "put_entry", blocked_put)
    loader = FineWebLoader(config(tokenizer="byte"))
    closed = threading.Event()
    try:
        loader.next_batch()
        source = loader.pipeline.documents.opened
        assert entered.wait(60), "the first batch's write never reached the head cache"
        threading.Thread(target=lambda: (loader.close(join_timeout=join_s), closed.set()), daemon=True).start()
        assert closed.wait(join_s + margin_s), "close waited for the stuck write"
        assert not release.is_set() and not source.wait_for_writes(0.0)  # the write is still blocked
    finally:
        release.set()
    assert source.wait_for_writes(60.0)

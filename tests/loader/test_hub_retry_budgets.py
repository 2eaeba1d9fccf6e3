"""Each loader's Hub retries are its own (fwe_cli.loader.remote.transient.RetryScope): bounded by its --timeout and written to
its heartbeat, on every thread it starts (producer, listing, read-ahead, tokenizer download), whatever other loaders
the process holds. Against the test Hub, in this process."""

from __future__ import annotations

import orjson

from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.hub.native import HubNative
from tests.hubsim.repos import DATASET_REPO, MODEL_REPO
from tests.loader.test_hub_early_start import wait_for

SHORT_S, RETRY_AFTER_S, LONG_S = 2.0, 3, 60.0  # a Retry-After past the short loader's budget, well inside the long's


def _loader(beats, tokenizer: str, timeout: float) -> FineWebLoader:
    return FineWebLoader(resolve_config(env={}, source="hub", tokenizer=tokenizer, seq_len=256, hub_cache=False,
                                        loader_timeout=timeout, heartbeat_dir=str(beats)))


def _retries(beats) -> list[dict]:
    lines = (beats / "heartbeat_rank0.jsonl").read_bytes().splitlines()
    return [event for event in map(orjson.loads, lines) if event["msg"] == "fineweb_hub_retry"]


def test_two_loaders_in_one_process_retry_within_their_own_budgets(hub_env, tmp_path):
    """A loader with a 2 s timeout is open (its first row group's range read was answered 503 once and retried on
    its read-ahead thread) while a 60 s loader starts against a Hub answering its listing and its tokenizer request
    503 with Retry-After 3 s: the 60 s loader waits the 3 s and starts (its retries are not cut by the other's 2 s
    budget), its heartbeat has exactly its two retries (listing, tokenizer), and the 2 s loader's has exactly its
    own range read's."""
    short_beats, long_beats = tmp_path / "short", tmp_path / "long"
    hub_env.set_faults(fail_count=1, fail_status=503, fail_match=r"parquet range=bytes=4-")
    short = _loader(short_beats, "byte", SHORT_S)
    try:
        short.next_batch(timeout=120)  # the wait is the test's bound; its budget for retries stays SHORT_S
        hub_env.set_faults(fail_count=2, fail_status=503, retry_after=RETRY_AFTER_S, fail_distinct=True,
                           fail_match=r"/revision/|tokenizer\.json")
        with _loader(long_beats, "gpt2", LONG_S) as long:
            long.next_batch()
    finally:
        short.close()
    failed = [r["endpoint"] for r in hub_env.requests() if r["status"] == 503]
    assert len(failed) == 3, failed  # the faults were met: one range read, then the listing and the tokenizer
    long_retries = _retries(long_beats)
    assert sorted(e["what"] for e in long_retries) == [
        f"fetching tokenizer.json of {MODEL_REPO}", f"reading {DATASET_REPO} at main"], long_retries
    assert all(e["reason"] == "HTTP 503" and e["wait_s"] >= RETRY_AFTER_S for e in long_retries)
    short_retries = _retries(short_beats)
    assert [e["what"].split()[0] for e in short_retries] == ["reading"], short_retries
    assert ".parquet" in short_retries[0]["what"] and short_retries[0]["wait_s"] <= SHORT_S


def test_retries_of_a_listing_started_early_go_to_the_loader_that_takes_it_over(hub_env, tmp_path):
    """A listing started before any loader exists (the `fwe` process's early start, HubNative.start_early) is
    answered 503 once and has retried before the loader is made: the loader that takes the listing over has that
    retry in its heartbeat."""
    hub_env.set_faults(fail_count=1, fail_status=503, fail_match=r"/revision/")
    config = resolve_config(env={}, source="hub", tokenizer="byte", seq_len=256, heartbeat_dir=str(tmp_path))
    HubNative.start_early(config.source, config.read_options())
    wait_for(hub_env, lambda r: "/revision/" in r["path"] and r["status"] == 200)  # the retry was decided before it
    with FineWebLoader(config) as loader:
        loader.next_batch()
    assert [(e["what"], e["attempt"]) for e in _retries(tmp_path)] == [(f"reading {DATASET_REPO} at main", 1)]

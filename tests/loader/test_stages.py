"""Every wait of the consumer is split by what the producer was doing meanwhile (flow.stages): an injected slow
stage — a source slow in its read, a tokenizer slow in its encode, a Hub read held back by the test server —
takes (nearly) all of the wait, and the split always adds up to the wait the heartbeat reports.

The slow stages under test are steps of a clock the test moves (PacedClock), or a Hub read the test server holds
back; no assertion compares a duration with a threshold that load could break: shares are compared on the test's
clock, sums exactly up to the heartbeat's rounding, and the Hub delay as a lower bound the server guarantees."""

from __future__ import annotations

import threading
import types

import orjson
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import SyntheticSource
from fwe_cli.loader.flow import stages
from fwe_cli.loader.flow.stages import StageClock, WaitBook, between, stage_key
from fwe_cli.loader.hub.listing import listing_stage
from fwe_cli.loader.tokenization.doc_tokenizer import ByteTokenizer

ROUNDING = 1e-5  # each heartbeat figure is rounded to 6 digits: a sum of a few of them is off by at most this


class FakeTime:
    """A perf_counter the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def test_clock_splits_an_interval_exactly_by_the_stages_entered(monkeypatch):
    """Seconds per stage between two snapshots are what was spent in each, the current stage counted up to the
    snapshot, and they add up to the time between the snapshots; stages with none are left out, in pipeline order."""
    fake = FakeTime()
    monkeypatch.setattr(stages, "time", types.SimpleNamespace(perf_counter=fake.perf_counter))
    clock = StageClock("open")
    fake.now += 1.0
    clock.enter("source_read")
    fake.now += 0.5
    t0, before = clock.snapshot()  # 0.5 s into source_read
    fake.now += 0.25
    clock.enter("tokenize")
    clock.enter("tokenize")  # the same stage again: no transition
    fake.now += 2.0
    clock.enter("source_read")
    fake.now += 0.125
    t1, after = clock.snapshot()
    split = between(before, after)
    assert split == {"source_read": 0.375, "tokenize": 2.0} and list(split) == ["source_read", "tokenize"]
    assert sum(split.values()) == t1 - t0 == 2.375
    assert after["open"] == 1.0


def test_every_description_the_producer_uses_has_its_key():
    """The pipeline's and the sources' stage descriptions map to their keys (a LoaderTimeout keeps the
    description; the split uses the key)."""
    cases = {"starting": "open", "opening source": "open", listing_stage("HuggingFaceFW/fineweb-edu", "x"): "open",
             "opening source (listing local files)": "open", "waiting for rank 0's answer (torch.distributed)": "open",
             "loading tokenizer 'gpt2'": "tokenizer_load", "reading first document": "source_read",
             "reading documents": "source_read", "reading token shards": "source_read", "tokenizing": "tokenize",
             "packing": "pack", "finished": "other"}
    assert {description: stage_key(description) for description in cases} == cases


def test_note_reaches_only_the_clock_bound_to_its_thread():
    """`note` moves the clock the calling thread is bound to, and does nothing on a thread bound to none (a
    bootstrap or the read-ahead thread reading the same source)."""
    clock = StageClock("open")
    stages.note("parse")  # this thread: bound to nothing (or to another test's clock), never to `clock`
    assert clock.key == "open"
    seen = []

    def producer():
        stages.bind(clock)
        stages.note("parse")
        seen.append(clock.key)

    thread = threading.Thread(target=producer)
    thread.start()
    thread.join()
    assert seen == ["parse"]


def test_a_wait_that_found_a_batch_queued_is_the_hand_off():
    """A wait that began with a batch in the queue is counted as queue_get, whatever the producer did; the first
    wait is kept apart from the later ones (the stall)."""
    queued = types.SimpleNamespace(qsize=lambda: 3)
    book, clock = WaitBook(), StageClock("source_read")
    _, first, _ = book.end(book.begin(clock, None), clock)
    dt, split, fill = book.end(book.begin(clock, queued), clock)
    assert list(split) == ["queue_get"] and split["queue_get"] == dt and fill == 3
    assert list(first) == ["source_read"] and book.first_s == first and book.stall_s == split


def _fetches(folder) -> list[dict]:
    lines = [orjson.loads(line) for line in (folder / "heartbeat_rank0.jsonl").read_bytes().splitlines()]
    return [line for line in lines if line["msg"] == "fineweb_fetch"]


def _pull(tmp_path, batches: int, pulled=lambda: None, **fields) -> tuple[dict, list[dict]]:
    """`batches` batches pulled as fast as they come (so the consumer waits on the producer); stats and the
    fineweb_fetch lines. `pulled` runs after the last batch, before the loader closes."""
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=1024, batch_size=1, queue_depth=2,
                            heartbeat_dir=str(tmp_path), **fields)
    with FineWebLoader(config) as loader:
        for _ in range(batches):
            loader.next_batch()
        stats = loader.stats()
        pulled()
    return stats, _fetches(tmp_path)


class PacedClock:
    """flow.stages' clock, moved by the test: each reading moves it a microsecond, and a slow step (`slow_step`, the
    stage under test) moves it a whole second, once the consumer waits on an empty queue (between the two snapshots
    of its wait, WaitBook.begin and end) and the producer is in that stage (for an encode on a tokenizer thread: the
    producer waits for it), waiting for both. The consumer's waits then hold the slow steps whole and little else,
    whatever the load: on a real clock, a loaded machine's scheduling delays (the consumer woken after the hand-off,
    the producer's other stages preempted) take a share of every wait."""

    TICK_S, STEP_S = 1e-6, 1.0
    BOUND_S = 120.0  # a bound on a hang (the producer never in the stage, the consumer never waiting), not a timing

    def __init__(self, monkeypatch):
        self._now = 0.0
        self._waiting: StageClock | None = None  # the producer's clock while the consumer waits on an empty queue
        self._stopped = False
        self._changed = threading.Condition()
        monkeypatch.setattr(stages, "time", types.SimpleNamespace(perf_counter=self.perf_counter))
        begin, end, enter = WaitBook.begin, WaitBook.end, StageClock.enter

        def begin_paced(book, clock, prefetcher):
            began = begin(book, clock, prefetcher)
            if began[2] is not None:  # a snapshot was taken: the queue was empty, the consumer waits on the producer
                with self._changed:
                    self._waiting = clock
                    self._changed.notify_all()
            return began

        def end_paced(book, began, clock):
            with self._changed:
                self._waiting = None
            return end(book, began, clock)

        def enter_paced(clock, key):
            enter(clock, key)
            with self._changed:
                self._changed.notify_all()

        monkeypatch.setattr(WaitBook, "begin", begin_paced)
        monkeypatch.setattr(WaitBook, "end", end_paced)
        monkeypatch.setattr(StageClock, "enter", enter_paced)

    def perf_counter(self) -> float:
        with self._changed:
            self._now += self.TICK_S
            return self._now

    def slow_step(self, stage: str) -> None:
        """Wait until the consumer waits on an empty queue and the producer is in `stage`, then take STEP_S (return
        at once once `stop`ped)."""
        with self._changed:
            ready = self._changed.wait_for(
                lambda: self._stopped or (self._waiting is not None and self._waiting.key == stage), self.BOUND_S)
            assert ready, f"within {self.BOUND_S:g} s the consumer never waited while the producer was in {stage}"
            if not self._stopped:
                self._now += self.STEP_S

    def stop(self) -> None:
        """Slow steps return at once from now on (the loader is about to close)."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()


def _check_sums(stats: dict, fetches: list[dict]) -> None:
    """Each line's split adds up to its wait; the stats' totals are the lines' sums (first batch apart)."""
    for line in fetches:
        assert isinstance(line["queue_fill"], int) and line["fetch_p50_ms"] is not None  # old fields kept
        assert abs(sum(line["wait_s_by_stage"].values()) - line["dt_fetch_s"]) <= ROUNDING, line
    later = [line for line in fetches if line["step"] > 1]
    assert abs(sum(stats["stall_by_stage_s"].values()) - sum(line["dt_fetch_s"] for line in later)) \
        <= ROUNDING * len(later)
    assert stats["first_wait_by_stage_s"] == fetches[0]["wait_s_by_stage"]
    assert set(stats["producer_s_by_stage"]) >= {"open", "source_read", "tokenize", "pack"}


def _share(stats: dict, stage: str) -> float:
    split = stats["stall_by_stage_s"]
    return split.get(stage, 0.0) / sum(split.values())


def test_a_source_slow_in_its_read_takes_the_wait(tmp_path, monkeypatch):
    """Each document read takes a slow step of the stages' clock (PacedClock): source_read holds >= 90 % of the waits
    after the first batch."""
    clock = PacedClock(monkeypatch)
    read = SyntheticSource.read

    def slow_read(self, pieces, at):
        for item in read(self, pieces, at):
            clock.slow_step("source_read")
            yield item

    monkeypatch.setattr(SyntheticSource, "read", slow_read)
    stats, fetches = _pull(tmp_path, 30, pulled=clock.stop, tokenizer_threads=1)
    _check_sums(stats, fetches)
    assert stats["stall_by_stage_s"].get("source_read", 0) >= PacedClock.STEP_S  # a later batch read one
    assert _share(stats, "source_read") >= 0.9, stats["stall_by_stage_s"]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_tokenizer_slow_in_its_encode_takes_the_wait(tmp_path, monkeypatch, threads):
    """Each encode call takes a slow step of the stages' clock (PacedClock), on the producer (1 thread) or the
    tokenizer threads (2: the producer waits for it, its stage then tokenize): tokenize holds >= 90 % of the waits
    after the first batch."""
    clock = PacedClock(monkeypatch)
    encode = ByteTokenizer.encode_docs

    def slow_encode(self, texts):
        clock.slow_step("tokenize")
        return encode(self, texts)

    monkeypatch.setattr(ByteTokenizer, "encode_docs", slow_encode)
    stats, fetches = _pull(tmp_path, 30, pulled=clock.stop, tokenizer_threads=threads, doc_batch=2)
    _check_sums(stats, fetches)
    assert stats["stall_by_stage_s"].get("tokenize", 0) >= PacedClock.STEP_S  # a later batch waited on one
    assert _share(stats, "tokenize") >= 0.9, stats["stall_by_stage_s"]


def test_a_late_hub_read_is_a_source_read_and_its_decode_a_parse(hub_env, tmp_path):
    """The test Hub holds each parquet data read back 1 s: the first batch's wait has at least that second in
    source_read (the producer waited on the read-ahead meanwhile) and the row group's decode in parse, not the
    other way round; the split adds up to the wait."""
    hub_env.set_faults(burst_every=1, burst_delay_s=1.0, burst_match=r"parquet range=bytes=4-")
    config = resolve_config(env={}, source="hub", tokenizer="byte", seq_len=256, heartbeat_dir=str(tmp_path))
    with FineWebLoader(config) as loader:
        loader.next_batch()
        stats = loader.stats()
    first = _fetches(tmp_path)[0]
    assert "burst" in [r["fault"] for r in hub_env.requests()]
    assert first["wait_s_by_stage"]["source_read"] >= 1.0 and first["wait_s_by_stage"]["parse"] > 0
    assert abs(sum(first["wait_s_by_stage"].values()) - first["dt_fetch_s"]) <= ROUNDING
    assert stats["first_wait_by_stage_s"] == first["wait_s_by_stage"]

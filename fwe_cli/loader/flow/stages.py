"""Where the producer's time goes, and so what each of the consumer's waits was spent on.

The producer (pipeline.Pipeline, on the prefetch thread) is always in exactly one stage. Its human description
(`Pipeline.stage`, what a LoaderTimeout names) maps to one of a few keys (`stage_key`):

    open            opening the source (file listing, Hub handshake and listing, a rank lock), before the first read
    tokenizer_load  waiting for the tokenizer to load (download and parse), beside the source's opening
    source_read     reading documents: a Hub range read or the read-ahead it waits on, a disk read, and for local
                    JSONL/TXT the line decoding too (read and decoded line by line: one step)
    parse           decoding a fetched parquet row group (the native Hub reader) into documents
    tokenize        encoding documents (or waiting for the tokenizer threads' result)
    pack            cutting the token stream into batches
    queue_put       handing a batch to the prefetch queue (waiting for room while it is full)
    other           anything else (the producer has finished)

A `StageClock` keeps the cumulative seconds spent in each key: the producer calls `enter(key)` at each transition
(a lock and an addition), anyone may take a `snapshot()` (the totals as of that moment, the current stage counted up
to it). The time spent in each stage between two snapshots is their difference, and it adds up to the time between
them: so the consumer's wait in next_batch, snapshotted at its start and end, is split exactly by what the producer
did meanwhile (`WaitBook`), however many transitions happened, with nothing kept per transition.

Sources do not know about the clock; one that can tell its own read from its decode (the native Hub reader) says
which it is in with `note(key)`, which reaches the clock the pipeline bound to the producer thread (`bind`) and does
nothing on any other thread (a bootstrap reading the same files, the read-ahead thread), so its description, and a
LoaderTimeout's message, stay the pipeline's.

The consumer's side, `WaitBook`: each wait that found the queue empty is split by the producer's stages over the
wait; a wait that found a batch queued took only the hand-off itself (`queue_get`). Totals over the waits after the
first batch are `stall_by_stage_s` in `FineWebLoader.stats()`, the first batch's own `first_wait_by_stage_s`.
"""

from __future__ import annotations

import threading
import time

STAGES = ("open", "tokenizer_load", "source_read", "parse", "tokenize", "pack", "queue_put", "queue_get", "other")
"""Every key a split may hold, in pipeline order (queue_get is the consumer's own hand-off, never the producer's)."""
_PREFIXES = (("starting", "open"), ("opening source", "open"), ("waiting for", "open"),
             ("loading tokenizer", "tokenizer_load"), ("reading", "source_read"), ("tokenizing", "tokenize"),
             ("packing", "pack"))
_bound = threading.local()
_known: dict[str, str] = {}  # description -> key: the producer sets the same few descriptions again and again


def stage_key(description: str) -> str:
    """The key of a producer stage description ('reading first document' -> 'source_read'); 'other' if unknown."""
    key = _known.get(description)
    if key is None:
        key = next((key for prefix, key in _PREFIXES if description.startswith(prefix)), "other")
        if len(_known) < 1024:  # descriptions naming files or repos are many only in a long-lived process
            _known[description] = key
    return key


class StageClock:
    """Cumulative seconds per stage key of one producer; `enter` from the producer, `snapshot` from any thread."""

    def __init__(self, key: str = "open"):
        self._lock = threading.Lock()
        self._totals: dict[str, float] = {}
        self._key = key
        self._since = time.perf_counter()

    def enter(self, key: str) -> None:
        """The producer is in `key` from now on."""
        if key == self._key:  # read without the lock: only the producer changes it
            return
        with self._lock:
            now = time.perf_counter()
            self._totals[self._key] = self._totals.get(self._key, 0.0) + (now - self._since)
            self._key, self._since = key, now

    @property
    def key(self) -> str:
        return self._key

    def snapshot(self) -> tuple[float, dict[str, float]]:
        """(time.perf_counter() now, seconds spent in each stage until now)."""
        with self._lock:
            now = time.perf_counter()
            totals = dict(self._totals)
            totals[self._key] = totals.get(self._key, 0.0) + (now - self._since)
        return now, totals


def between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Seconds spent in each stage between two snapshots' totals (stages with none left out), in STAGES order."""
    spent = {key: after[key] - before.get(key, 0.0) for key in after}
    return {key: spent[key] for key in sorted(spent, key=_order) if spent[key] > 0.0}


def _order(key: str) -> int:
    return STAGES.index(key) if key in STAGES else len(STAGES)


def bind(clock: StageClock) -> None:
    """Make `clock` the one `note` reaches from the calling thread (the producer's)."""
    _bound.clock = clock


def note(key: str) -> None:
    """The producer is in `key` from now on, if this thread is a bound producer's; otherwise nothing."""
    clock = getattr(_bound, "clock", None)
    if clock is not None:
        clock.enter(key)


def add(totals: dict[str, float], split: dict[str, float]) -> None:
    for key, seconds in split.items():
        totals[key] = totals.get(key, 0.0) + seconds


def rounded(split: dict[str, float], digits: int = 6) -> dict[str, float]:
    return {key: round(seconds, digits) for key, seconds in split.items()}


class WaitBook:
    """The consumer's waits: each one's split by producer stage, the queue fill it found, and totals (of a fixed
    size: nothing is kept per wait).

        began = book.begin(pipeline.clock, prefetcher)   # before taking the batch
        ...                                               # take it
        dt, split, fill = book.end(began, pipeline.clock)
    """

    def __init__(self) -> None:
        self.fill_count = 0  # waits that read the queue's fill (with prefetch only)
        self.fill_total = 0  # the batches they found queued, summed
        self.stall_s: dict[str, float] = {}
        self.first_s: dict[str, float] | None = None

    def begin(self, clock: StageClock, prefetcher) -> tuple:
        """The wait starts now; `prefetcher` (None without prefetch: the consumer produces, nothing is queued)."""
        fill = prefetcher.qsize() if prefetcher is not None else None
        if fill is not None:
            self.fill_count += 1
            self.fill_total += fill
        if fill:  # a batch is queued: the wait is the hand-off, whatever the producer does (no clock reading)
            return clock, time.perf_counter(), None, fill
        t0, totals = clock.snapshot()
        return clock, t0, totals, fill

    def end(self, began: tuple, clock: StageClock) -> tuple[float, dict[str, float], int | None]:
        """(seconds waited, their split by stage, batches queued when the wait began), counted in the totals."""
        old, t0, before, fill = began
        if before is None:
            dt = time.perf_counter() - t0
            split = {"queue_get": dt}
        else:
            t1, after = clock.snapshot()
            dt = t1 - t0
            # a synthetic fallback may have replaced the producer during the wait: its clock started afresh
            split = between(before, after) if clock is old else {"other": dt}
        if self.first_s is None:
            self.first_s = split
        else:
            add(self.stall_s, split)
        return dt, split, fill

    def stats(self, clock: StageClock) -> dict:
        """The loader stats' share: mean queue fill, the waits' totals by stage, the producer's own time by stage."""
        return {"mean_queue_fill": self.fill_total / self.fill_count if self.fill_count else None,
                "stall_by_stage_s": rounded(between({}, self.stall_s)),
                "first_wait_by_stage_s": None if self.first_s is None else rounded(self.first_s),
                "producer_s_by_stage": rounded(between({}, clock.snapshot()[1]))}

"""The document a batch ended in (sources.deal.Ended): what a state records (`ended`, and with best-fit rows `held`)
so that a resume at another world size knows, for each reader, how far into which document it got (state.elastic).

The pipeline remembers each document batch it made (its first document's `resume`, its Documents) and, once encoded,
each document's tokens in the stream (`measured`); for a token directory read in chunks, each document's tokens and
its cursor by number; for batches a warm start replayed, the document each ended in as it was kept. The consumer lets
go of those before its latest batch's (`release_before`), so what is held is what is queued, in flight and being
packed, however many document batches a batch spans. Thread-safe: the producer remembers, the consumer asks.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, NamedTuple

import numpy as np

from fwe_cli.loader.sources.deal import Ended


class _Measured(NamedTuple):
    """A document batch once encoded: its Documents, where each ends in its tokens, each one's tokens."""

    docs: list
    ends: np.ndarray
    lengths: np.ndarray


class _Chunk(NamedTuple):
    """A token directory's chunk: each document's tokens, and its cursor by number in the chunk."""

    lengths: np.ndarray
    cursor: Callable[[int], object]


class RecentBatches:
    """The document batches a pipeline made that the consumer has not moved past (see the module docstring)."""

    def __init__(self):
        self._held: deque[list] = deque()  # [first document's resume, Documents | _Measured | _Chunk | Ended]
        self._lock = threading.Lock()

    def remember(self, first: object, what: list | _Chunk | Ended) -> None:
        """A document batch (its Documents), a token directory's chunk or a replayed batch's end, in stream order."""
        with self._lock:
            self._held.append([first, what])

    def chunk(self, first: object, lengths: np.ndarray, cursor: Callable[[int], object]) -> None:
        """A token directory's chunk starting at the document of cursor `first`."""
        self.remember(first, _Chunk(np.asarray(lengths), cursor))

    def measured(self, first: object, lengths: np.ndarray) -> None:
        """The tokens each document of the batch starting at `first` puts in the stream (once encoded)."""
        with self._lock:
            for entry in self._held:
                if entry[0] is first:
                    if isinstance(entry[1], list):
                        entry[1] = _Measured(entry[1], np.cumsum(lengths), lengths)
                    return

    def held(self, position: dict | None) -> object | None:
        """What is held for the document batch of the batch at `position` (None: nothing)."""
        if position is None:
            return None
        with self._lock:
            return next((what for first, what in self._held if first is position["doc"]), None)

    def release_before(self, position: dict | None) -> None:
        """The consumer has the batch at `position`: the document batches before its own are no longer needed."""
        if position is None:
            return
        with self._lock:
            for i, (first, _what) in enumerate(self._held):
                if first is position["doc"]:
                    for _ in range(i):
                        self._held.popleft()
                    return

    def ended(self, position: dict | None) -> Ended | None:
        """The document the batch at `position` ended in: its cursor, tokens of it delivered, its tokens (as this
        reader's stream holds them); None before the first batch."""
        return self.ended_in(self.held(position), position)

    @staticmethod
    def ended_in(held: object | None, position: dict | None) -> Ended | None:
        """`ended` from what `held` returned for `position` (taken earlier, on another thread): the first document
        whose tokens reach past the position's `skip` (or the last, delivered whole)."""
        if held is None or position is None or isinstance(held, list):  # (a batch is made after its measure)
            return None
        if isinstance(held, Ended):
            return held
        skip, lengths = position["skip"], held.lengths
        ends = held.ends if isinstance(held, _Measured) else np.cumsum(lengths)
        j = min(int(np.searchsorted(ends, skip, side="right")), len(ends) - 1)
        delivered = int(skip - (ends[j - 1] if j else 0))
        cursor = held.docs[j].resume if isinstance(held, _Measured) else held.cursor(j)
        return Ended(cursor, min(delivered, int(lengths[j])), int(lengths[j]))

    def after(self, position: dict | None, n: int) -> Ended | None:
        """The document `n` documents after the one a best-fit batch's `position` lands on (its `skip` is that
        document's start), delivered whole: the last one its buffer had read. None when it is not held (a batch
        replayed from a warm start's kept ones)."""
        if position is None:
            return None
        with self._lock:
            entries = [what for _first, what in self._held]
            at = next((i for i, (first, _what) in enumerate(self._held) if first is position["doc"]), None)
        if at is None:
            return None
        target = None
        for what in entries[at:]:
            if isinstance(what, (list, Ended)):
                return None
            lengths = what.lengths
            if target is None:
                ends = what.ends if isinstance(what, _Measured) else np.cumsum(lengths)
                target = int(np.searchsorted(ends, position["skip"], side="right")) + n
            if target < len(lengths):
                cursor = what.docs[target].resume if isinstance(what, _Measured) else what.cursor(target)
                return Ended(cursor, int(lengths[target]), int(lengths[target]))
            target -= len(lengths)
        return None


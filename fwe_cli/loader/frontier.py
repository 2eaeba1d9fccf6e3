"""The document a batch ended in: what a state records (`consumed`) so that a resume at another world size
(loader.elastic) knows, for each rank, how far into which document it got.

The pipeline remembers each document batch it made (its first document's `resume`, its Documents) and, once encoded,
each document's tokens in the stream (`measured`); for a token directory read in order, the chunk's first index and
its documents' tokens. The consumer lets go of those before its latest batch's (`release_before`), so what is held is
what is queued, in flight and being packed, however many document batches a batch spans. Thread-safe: the producer
remembers, the consumer asks.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import NamedTuple

import numpy as np


class _Measured(NamedTuple):
    """A document batch once encoded: its Documents, where each ends in its tokens, each one's tokens."""

    docs: list
    ends: np.ndarray
    lengths: np.ndarray


class _Chunk(NamedTuple):
    """A token directory's chunk read in order: its epoch, its first document's index, each document's tokens."""

    epoch: int
    first: int
    lengths: object


class RecentBatches:
    """The document batches a pipeline made that the consumer has not moved past (see the module docstring)."""

    def __init__(self):
        self._held: deque[list] = deque()  # [first document's resume, Documents | _Measured | _Chunk]
        self._lock = threading.Lock()

    def remember(self, first: dict | None, what: object) -> None:
        """A document batch (its Documents), or a token directory's chunk ((epoch, first index, each document's
        tokens)), in stream order."""
        with self._lock:
            self._held.append([first, what if isinstance(what, list) else _Chunk(*what)])

    def measured(self, first: dict | None, lengths: np.ndarray) -> None:
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

    def frontier(self, position: dict | None) -> list[int] | None:
        """[epoch, document, tokens of it delivered, its tokens] of the document the batch at `position` ended in
        (tokens as this rank's stream holds them); None before the first batch. What a change of world size starts
        from (`replan`)."""
        return self.frontier_of(self.held(position), position)

    def frontier_of(self, held: object | None, position: dict | None) -> list[int] | None:
        """`frontier` from what `held` returned for `position` (taken earlier, on another thread)."""
        found = self._found(held, position)
        if found is None:
            return None
        doc, delivered, length = found
        if isinstance(doc, tuple):  # a token directory's chunk: (epoch, index)
            return [doc[0], doc[1], delivered, length]
        return [doc.resume["epoch"], doc.resume["index"] + doc.resume["k"], delivered, length]

    def frontier_document(self, position: dict | None) -> tuple[object, int, int] | None:
        """(the Document the batch at `position` ended in, its tokens delivered, its tokens); None when there is none
        (before the first batch, or a token directory read in chunks)."""
        found = self._found(self.held(position), position)
        return None if found is None or isinstance(found[0], tuple) else found

    @staticmethod
    def _found(held: object | None, position: dict | None) -> tuple[object, int, int] | None:
        """The first document whose tokens reach past the position's `skip` (or the last, delivered whole), its tokens
        delivered, its tokens."""
        if held is None or position is None or isinstance(held, list):  # (a batch is made after its measure)
            return None
        skip, lengths = position["skip"], held.lengths
        ends = held.ends if isinstance(held, _Measured) else np.cumsum(lengths)
        j = min(int(np.searchsorted(ends, skip, side="right")), len(ends) - 1)
        delivered = int(skip - (ends[j - 1] if j else 0))
        doc = held.docs[j] if isinstance(held, _Measured) else (held.epoch, held.first + j)
        return doc, min(delivered, int(lengths[j])), int(lengths[j])

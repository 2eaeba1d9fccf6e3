"""Best-fit rows: every row filled from a buffer of whole documents, so that far fewer tokens are cropped than when a
row takes the documents in stream order (packing's greedy rows).

The buffer holds up to `capacity` documents. A row is filled one document at a time, each time the buffer is full
(and, once the stream has ended, until it is empty): the largest document that fits the room left (the earliest read
of equal length); only when none fits, the one whose crop wastes least (the shortest: its rest is dropped and
counted). A document longer than a row loses its rest whenever it is taken, so it is taken at a row's start, where
that is all it loses (the oldest such first); a document that has waited while `capacity` more were read starts the
next row, so none is held for long. The buffer is "full" at RAMP documents at first, one more for every two read, up to `capacity`: the
first batch waits for tens of documents, not thousands. The rows depend only on each document's tokens, in stream
order: never on how documents arrived (doc batch, threads, backend).

A batch's `Mark` says how to come back to the moment after it: the oldest document still held (`at`: its number in
the stream, where a resumed stream starts reading again), how many documents had been read from it on (`read`) and
which of them were already taken (`taken`, a bitmap). Re-reading from there, the documents marked taken are passed
over and the others refill the buffer as it was; the same rows follow. The age rule keeps what a resume re-reads
small: 2 to 5 x capacity documents on real text (runbooks/configuration.md).
"""

from __future__ import annotations

import base64
from bisect import bisect_left, bisect_right, insort
from collections import deque
from typing import Iterator, NamedTuple

import numpy as np

from fwe_cli.errors import ConfigError

RAMP = 32  # documents the buffer holds before its first row; it grows by one for every two read, up to capacity
NEVER = 1 << 62  # a sequence number above any real one


class Held(NamedTuple):
    """A buffered document: its tokens, and the position within its document of the first (0 unless resumed)."""

    ids: np.ndarray
    offset: int


class Mark(NamedTuple):
    """Where a batch leaves the stream (see the module docstring): the number of the oldest document held (of the next
    to read, when none is), documents read from it on, and which of them are taken (`encode_taken`)."""

    at: int
    read: int
    taken: str

    def to_json(self) -> dict:
        return {"at": self.at, "read": self.read, "taken": self.taken}

    @classmethod
    def from_json(cls, data: object) -> "Mark":
        """The Mark `to_json` wrote; ConfigError for anything else."""
        if not (isinstance(data, dict) and all(isinstance(data.get(k), int) and data[k] >= 0 for k in ("at", "read"))
                and isinstance(data.get("taken"), str)):
            raise ConfigError(f"resume state's best-fit buffer is not an {{at, read, taken}} mark ({str(data)[:80]})")
        return cls(data["at"], data["read"], data["taken"])


def encode_taken(flags: np.ndarray) -> str:
    """A bitmap (bool per document) as compact text: base64 of its packed bits."""
    return base64.b64encode(np.packbits(flags.astype(np.uint8)).tobytes()).decode("ascii")


def decode_taken(text: str, count: int) -> np.ndarray:
    """`encode_taken`'s bitmap of `count` documents; ConfigError for text that is not one."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeError):
        raise ConfigError(f"resume state's best-fit bitmap is not base64 ({text[:40]!r})") from None
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8))
    if len(bits) < count:
        raise ConfigError(f"resume state's best-fit bitmap holds {len(bits)} documents, its mark names {count}")
    return bits[:count].astype(bool)


class BestFit:
    """Rows of `row` tokens filled by best fit from up to `capacity` documents; `resume` (a Mark's JSON) restores the
    buffer of a batch's end.

    `add(ids, lengths, offsets)` takes documents in stream order and yields a piece for each one placed in a row: (the
    document, its tokens placed, whether the row is now full); `finish()` empties the buffer once the stream has
    ended."""

    def __init__(self, row: int, capacity: int, resume: dict | None = None):
        self.row, self.capacity = row, capacity
        self._held: dict[int, Held] = {}
        self._by_size: list[tuple[int, int]] = []  # (tokens, number) of every held document, sorted
        self._order: deque[int] = deque()  # numbers in reading order (taken ones removed lazily)
        self._long: deque[int] = deque()  # the same, of the documents longer than a row
        self._room = row  # room left in the row being filled
        mark = Mark.from_json(resume) if resume is not None else Mark(0, 0, "")
        self._read = mark.at  # documents read in the stream (the next one's number)
        self._replay = decode_taken(mark.taken, mark.read) if mark.read else None  # a resume's: taken before?
        self._replay_from = mark.at

    @property
    def read(self) -> int:
        """The number of the next document to read."""
        return self._read

    def _full(self) -> bool:
        return len(self._held) >= min(self.capacity, RAMP + self._read // 2)

    def add(self, ids: np.ndarray, lengths: np.ndarray, offsets: np.ndarray) -> Iterator[tuple[Held, int, bool]]:
        """Take the documents (tokens `ids`, each one's `lengths` and first position `offsets`) into the buffer, a
        piece into the row each time it is full (a resume's re-read documents only refill it)."""
        start = 0
        for length, offset in zip(lengths.tolist(), offsets.tolist()):
            seq = self._read
            self._read += 1
            doc = Held(ids[start:start + length], offset)
            start += length
            if self._replay is not None:
                k = seq - self._replay_from
                if not self._replay[k]:
                    self._hold(seq, doc)
                if k == len(self._replay) - 1:
                    self._replay = None
                continue
            self._hold(seq, doc)
            if self._full():
                yield self._pick()

    def finish(self) -> Iterator[tuple[Held, int, bool]]:
        """The stream has ended: empty the buffer into rows, a piece at a time."""
        while self._held:
            yield self._pick()

    def _hold(self, seq: int, doc: Held) -> None:
        self._held[seq] = doc
        insort(self._by_size, (len(doc.ids), seq))
        self._order.append(seq)
        if len(doc.ids) > self.row:
            self._long.append(seq)

    def _choose(self) -> int:
        """The number of the document that goes into the row next (see the module docstring)."""
        sizes, room = self._by_size, self._room
        if room == self.row:
            oldest = self._oldest(self._order)
            if self._read - oldest > self.capacity:  # it waited while `capacity` more were read: it starts the row
                return oldest
            if sizes[-1][0] > room:  # longer than a row: at a row's start it loses only what is over the row (the
                return self._oldest(self._long)  # oldest such first: each loses the same whenever it is taken)
        i = bisect_right(sizes, (room, NEVER)) - 1
        if i < 0:  # none fits: the shortest wastes least
            return sizes[0][1]
        return sizes[bisect_left(sizes, (sizes[i][0], -1))][1]

    def _oldest(self, order: deque[int]) -> int:
        """The first number of `order` still held (those taken are let go)."""
        while order[0] not in self._held:
            order.popleft()
        return order[0]

    def _pick(self) -> tuple[Held, int, bool]:
        """The chosen document out of the buffer into the row: (it, its tokens placed, whether the row is now full).
        What a piece leaves out is cropped: the packer counts it."""
        seq = self._choose()
        doc = self._held.pop(seq)
        del self._by_size[bisect_left(self._by_size, (len(doc.ids), seq))]
        take = min(len(doc.ids), self._room)
        self._room -= take
        full = self._room == 0
        if full:
            self._room = self.row
        return doc, take, full

    def mark(self) -> Mark:
        """Where the stream stands now, between rows (not while a resume re-reads): see Mark."""
        low = self._oldest(self._order) if self._held else self._read
        flags = np.ones(self._read - low, dtype=bool)
        flags[[seq - low for seq in self._held]] = False
        return Mark(low, self._read - low, encode_taken(flags))

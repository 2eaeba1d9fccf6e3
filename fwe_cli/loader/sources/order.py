"""The order documents reach a reader in: its share of each epoch, the shuffle's windows, and where a stream resumes.

A source with units (a leaf, or a composite of units such as a bootstrap and its Hub tail) is read here: for each
epoch, the reader's spans (its fresh share of the epoch's line, or what a changed world dealt it: sources.deal), each
read as pieces of that line (`Source.read`), nothing else. Without a shuffle documents come in line order. With one,
the units were permuted (sources.units) and each run of `window` consecutive documents of a span is permuted by
(seed, epoch, where the run begins on the line): a pure function of the data and the readers, never of Q, doc batch
or threads.

Each document carries its `Cursor`: the epoch, the span, the `Window` it is in (where reading starts to get that
window again, how many documents it holds, where its last one lies) and its place in the permuted window. A stream
opened at a cursor reads that window again (at most `window` documents) and yields that document first; what a
reader leaves to another world follows from the cursor too (deal.leftover).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Callable, Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.deal import Share, Span, fresh
from fwe_cli.loader.sources.position import Position

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class Window(Position, name="window"):
    """A run of a span's documents permuted together (one document without a shuffle): read from line coordinate `x`
    after position `at` (a floor in the unit `x` lies in; None: none), `n` documents, the last of which (in reading
    order) is anchored at `end_x` with `end_at` its position after it."""

    x: int
    at: Position | None
    n: int
    end_x: int
    end_at: Position | None


@dataclass(frozen=True, slots=True)
class Cursor(Position, name="cursor", version=2):
    """A document's place in a reader's stream: epoch, span number, window, place in the permuted window."""

    epoch: int
    span: int
    window: Window
    k: int


@dataclass(frozen=True)
class StreamOrder:
    """How a reader's stream is ordered: which reader it is, the epochs, the shuffle (seed, window)."""

    readers: Shard
    epochs: int
    seed: int | None
    window: int
    first: int = 0
    """The epoch a stream begins at when it starts afresh (a cycled source of a mixture, epoch after epoch)."""

    @property
    def size(self) -> int:
        """Documents permuted together: the shuffle's window, 1 without a shuffle."""
        return self.window if self.seed is not None else 1


def permuted(n: int, *key: object) -> list[int]:
    """range(n) in the order of a permutation fixed by `key` (string-seeded: the same on every platform and run)."""
    order = list(range(n))
    random.Random(":".join(map(str, key))).shuffle(order)
    return order


def leaf_documents(source, order: StreamOrder, start: Cursor | None = None,
                   share: Share | None = None) -> Iterator[Document]:
    """The reader's documents of `source` over the epochs from `start` (a Cursor: that document first; None: from
    the beginning of `share`'s first epoch, else of the order's first); `share`: the spans a changed world dealt this
    reader for some epochs (None: the fresh share, every epoch). Each document carries its `resume` (Cursor) and the tokens of it
    another world delivered (`delivered`)."""
    for layout, epoch, number, span, here in spans(source, order, start, share):
        yield from _span(source, layout, epoch, number, span, order, here)


def spans(source, order: StreamOrder, start: Cursor | None = None, share: Share | None = None):
    """(layout, epoch, span number, span, the cursor in it to start from or None) of each span the reader reads, in
    order, from `start`'s (see leaf_documents)."""
    epoch = start.epoch if start is not None else (share.epoch if share is not None else order.first)
    while epoch < order.epochs:
        layout = source.layout(epoch, order.seed)
        mine = share.of(epoch) if share is not None else None
        mine = fresh(layout.total, order.readers) if mine is None else mine
        here = start if start is not None and start.epoch == epoch else None
        for number in range(here.span if here is not None else 0, len(mine)):
            yield layout, epoch, number, mine[number], (here if here is not None and here.span == number else None)
        epoch += 1


def _span(source, layout, epoch: int, number: int, span: Span, order: StreamOrder,
          start: Cursor | None) -> Iterator[Document]:
    """The documents of one span, window by window, from `start` (a cursor in it) or its beginning."""
    x, at = (start.window.x, start.window.at) if start is not None else (span.lo, span.at)
    reads = source.read(layout.pieces(x, span.hi), at)
    size = order.size
    while block := list(islice(reads, size)):
        first = (x, at) == (span.lo, span.at)
        _last, end_at, end_x = block[-1]
        window = Window(x, at, len(block), end_x, end_at)
        places = permuted(len(block), "docs", order.seed, epoch, x) if order.seed is not None else range(len(block))
        begin = max(span.skip if first else 0, start.k if start is not None else 0)
        for k in range(begin, len(block)):
            doc = block[places[k]][0]
            doc.resume = Cursor(epoch, number, window, k)
            doc.delivered = span.delivered if first and k == span.skip else 0
            yield doc
        if span.rest:
            return
        start, x, at = None, end_x, end_at


def leaf_chunks(source, order: StreamOrder, start: Cursor | None,
                read: Callable[[list, Position | None], Iterator]) -> Iterator[tuple[np.ndarray, np.ndarray, Callable]]:
    """For a source of token ids read unshuffled, in its fresh share: (ids, each document's tokens, the cursor of
    its document number j) per chunk, from `start`; `read(pieces, at)` gives (ids, tokens, anchors on the line,
    position after document j) per chunk of those pieces (token_dir.read_token_chunks). A chunk's cursors are those
    leaf_documents gives its documents."""
    for layout, epoch, number, span, here in spans(source, order, start):
        x, at = (here.window.x, here.window.at) if here is not None else (span.lo, span.at)
        for ids, lengths, anchors, after in read(layout.pieces(x, span.hi), at):
            yield ids, lengths, _chunk_cursors(epoch, number, x, at, anchors, after)
            x, at = int(anchors[-1]), after(len(anchors) - 1)


def _chunk_cursors(epoch: int, number: int, x: int, at: Position | None, anchors: np.ndarray,
                   after: Callable[[int], Position]) -> Callable[[int], Cursor]:
    """The cursor of document j of a chunk that begins at (x, at), each a window of one (the first made once: a
    batch's position names it by identity)."""
    first = Cursor(epoch, number, Window(x, at, 1, int(anchors[0]), after(0)), 0)

    def cursor(j: int) -> Cursor:
        if j == 0:
            return first
        return Cursor(epoch, number, Window(int(anchors[j - 1]), after(j - 1), 1, int(anchors[j]), after(j)), 0)

    return cursor

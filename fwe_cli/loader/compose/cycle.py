"""One child's stream inside a mixture: from the last document taken from it, cycled epoch after epoch when its stop is
'cycle', its documents encoded ahead in chunks when the mixture counts tokens.

A reader whose share of an epoch holds none of a cycled source (one of fewer documents than readers) reads the whole
epoch instead, as its one reader: such a document's cursor is a `WholeEpoch`, so a stream resumed at it reads the
whole epoch on, not the reader's empty share.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.flow.in_order import in_order
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.base import Source
from fwe_cli.loader.sources.deal import plan_epoch
from fwe_cli.loader.sources.order import StreamOrder
from fwe_cli.loader.sources.position import Position

ENCODE_CHUNK = 64  # documents of one child encoded in one call (by tokens)


@dataclass(frozen=True, slots=True)
class WholeEpoch(Position, name="whole_epoch"):
    """A cycled source's document read in an epoch whose share held none for this reader: the epoch read whole, as
    its one reader; `at` is its cursor there."""

    at: Position


class ChildStream:
    """One child's documents for this reader (see the module docstring): after `cursor` (the last document taken
    from it, of epoch `epoch`), else from the beginning of its `plan` (what a changed world dealt it) or share."""

    def __init__(self, source: Source, order: StreamOrder, cursor: Position | None, plan: Position | None,
                 cycle: bool, epoch: int | None, encode: Callable[[list[Document]], list[Document]] | None,
                 pool: ThreadPoolExecutor | None, threads: int):
        docs = source.stream(order, cursor, plan) if not cycle else _cycled(source, order, cursor, plan, epoch)
        if cursor is not None:
            next(docs, None)  # the cursor's document was taken before
        self.docs = docs if encode is None else _encoded(docs, encode, pool, threads)


def _cycled(source: Source, order: StreamOrder, cursor: Position | None, plan, epoch: int | None) -> Iterator[Document]:
    """The child's documents epoch after epoch without end, from `cursor` (in `epoch`). It ends (and so does a mix
    that needs it) when an epoch holds no document at all."""
    whole = isinstance(cursor, WholeEpoch)
    cursor = cursor.at if whole else cursor
    epoch = epoch if cursor is not None else plan_epoch(plan, order.first)
    while True:
        found = False
        for alone in ((True,) if whole else (False, True)):
            this = dataclasses.replace(order, readers=Shard() if alone else order.readers, first=epoch,
                                       epochs=epoch + 1)
            for doc in source.stream(this, cursor, None if alone else plan):  # (its plan names the epochs it deals)
                found = True
                if alone:
                    doc.resume = WholeEpoch(doc.resume)
                yield doc
            if found or cursor is not None:
                break
        if not found and cursor is None:
            return
        epoch, cursor, whole = epoch + 1, None, False


def _encoded(docs: Iterator[Document], encode, pool, threads) -> Iterator[Document]:
    def chunks():
        while chunk := [doc for _, doc in zip(range(ENCODE_CHUNK), docs)]:
            yield chunk, None

    for encoded, _ in in_order(pool, threads, encode, chunks()):
        yield from encoded

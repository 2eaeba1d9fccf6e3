"""The order documents reach a rank in: epochs, the seeded shuffle, the shard, and where a stream resumes.

A source yields (document, position after it) pairs from a position it is opened at (`open_at(epoch, at)`; `at`
None is the start of the epoch). This stage numbers the documents of the whole stream (`index`, every shard, good
records only), groups them into windows of `window` consecutive documents (1 without a shuffle), permutes each
window with a permutation that is a pure function of (seed, epoch, the window's first index), and keeps the
documents whose position in that order the shard owns (i % mod == rem, or after a change of world size the plan of
loader.elastic, which also says how many tokens of a document were delivered before: `Document.delivered`). So every
rank sees a disjoint part of the same permutation, whatever its Q, doc batch or threads.

Each kept document carries `resume`: {"epoch", "index" (the window's first index), "at" (the source's position before
the window, a sources.position value), "k" (the document's place in the permuted window)}; `resume_to_json` and
`resume_from_json` are its JSON form. `ordered(..., start=doc.resume)` yields that
document first: the window is read again from `at` (at most `window` documents) and permuted again, nothing before
it is read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import islice
from typing import Callable, Iterator, Sequence, TypeVar

from fwe_cli.loader.documents import Document
from fwe_cli.loader.elastic import ElasticPlan, plain
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.position import Position, decode, encode

T = TypeVar("T")
Opener = Callable[[int, "Position | None"], Iterator[tuple[Document, "Position"]]]


@dataclass(frozen=True)
class StreamOrder:
    """How a rank's stream is ordered (what `ordered` takes besides the source): for a source that orders its
    children itself (a mixture), each child by the same settings."""

    shard: Shard
    epochs: int
    seed: int | None
    window: int
    files: Callable[[list, int], list]
    """The files of an epoch in its order: (files, epoch) -> files."""
    plan: ElasticPlan | None = None


def permuted(items: Sequence[T], *key: object) -> list[T]:
    """`items` in the order of a permutation fixed by `key` (string-seeded: the same on every platform and run)."""
    order = list(items)
    random.Random(":".join(map(str, key))).shuffle(order)
    return order


def ordered(open_at: Opener, shard: Shard, epochs: int = 1, seed: int | None = None, window: int = 1,
            start: dict | None = None, plan: ElasticPlan | None = None) -> Iterator[Document]:
    """The shard's documents over `epochs`, shuffled in windows when `seed` is given, from `start` (a `resume`);
    `plan`: which documents are the shard's after a change of world size (loader.elastic), else i % mod == rem."""
    plan = plan or plain(shard)
    start = start or {}
    size = window if seed is not None else 1
    epoch = int(start.get("epoch", 0))
    while epoch < epochs:
        first = epoch == int(start.get("epoch", 0))
        at = start.get("at") if first else None
        index = int(start.get("index", 0)) if first else 0
        skip = int(start.get("k", 0)) if first else 0
        docs = open_at(epoch, at)
        if size == 1:
            for doc, after in docs:
                if plan.owns(epoch, index):
                    doc.resume = {"epoch": epoch, "index": index, "at": at, "k": 0}
                    doc.delivered = plan.delivered(epoch, index)
                    yield doc
                index, at = index + 1, after
        else:
            while block := list(islice(docs, size)):
                for k, (doc, _after) in enumerate(permuted(block, "docs", seed, epoch, index)):
                    if k >= skip and plan.owns(epoch, index + k):
                        doc.resume = {"epoch": epoch, "index": index, "at": at, "k": k}
                        doc.delivered = plan.delivered(epoch, index + k)
                        yield doc
                skip = 0
                index, at = index + len(block), block[-1][1]
        epoch += 1


def resume_to_json(resume: dict) -> dict:
    """A document's `resume` as JSON (its source position as its own object)."""
    return dict(resume, at=encode(resume.get("at")))


def resume_from_json(data: dict) -> dict:
    """A `resume` read back from JSON: its source position typed again (ConfigError naming what does not fit)."""
    return dict(data, at=decode(data.get("at")))

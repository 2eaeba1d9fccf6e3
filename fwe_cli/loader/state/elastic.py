"""A world of readers continued by another: what each old reader left, dealt to the new readers, so that over both
worlds every document is delivered once.

What an old reader left is read from its state: the document its last batch ended in (`Source.frontier` of it: the
rest of its share, in every epoch it had not finished, is dealt again by the source's `plan_for`), and, with
best-fit rows, the documents its buffer held but had not put in a row yet: `held`, the stretch of its own stream
they lie in (from the oldest held, `read` documents, a bitmap of those taken). That stretch is read again as the old
reader read it (its plan, its place in the world) and its untaken documents are delivered by one new reader: a
`Replay`. A new reader's plan is then `Continued`: its replays first, then its share; a document of a replay carries
an `InReplay` cursor, so a state saved in the middle of a replay resumes there, and a world that changes again deals
the replays not yet read on, with what their readers held.

    plan = deal(source, olds, order)           # when the new reader's source opens (OldReader: one per old reader)
    for doc in documents(source, order, start, plan): ...
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import islice
from typing import Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.rows.best_fit import decode_taken
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.order import StreamOrder
from fwe_cli.loader.sources.position import Position


@dataclass(frozen=True, slots=True)
class Replay(Position, name="replay"):
    """What an old reader's best-fit buffer held: its stream (reader `rem` of `mod`, dealt `plan`) read again from the
    document at `start` for `read` documents, those not marked in `taken` (sources' bitmap, rows.best_fit) delivered;
    the first `past` of them were read by a reader it was dealt to before."""

    plan: Position | None
    mod: int
    rem: int
    start: Position
    read: int
    taken: str
    past: int = 0


@dataclass(frozen=True, slots=True)
class Continued(Position, name="continued"):
    """What a changed world dealt a reader: the replays it delivers first, then its share (`main`: the source's plan,
    None for its fresh one)."""

    replays: tuple
    main: Position | None


@dataclass(frozen=True, slots=True)
class InReplay(Position, name="in_replay"):
    """A document of replay `task` of a reader's plan: the `k`-th read again (counting the taken ones), its cursor in
    the old reader's stream `at`."""

    task: int
    k: int
    at: Position


@dataclass(frozen=True, slots=True)
class OldReader(Position, name="old_reader"):
    """One reader of a world that stopped, as its state says: reader `rem` of `mod`, dealt `plan` (None: its fresh
    share), its last batch ending `delivered` of the `tokens` of the document at `cursor` (None: it delivered
    nothing), and its best-fit buffer's stretch (`held_from`, `held_read`, `held_taken`; None: none held)."""

    mod: int
    rem: int
    plan: Position | None
    cursor: Position | None
    delivered: int
    tokens: int
    held_from: Position | None = None
    held_read: int = 0
    held_taken: str = ""


@dataclass(frozen=True, slots=True)
class Pending(Position, name="pending"):
    """A plan not dealt yet (its reader saved before its source opened): reader `rem` of `mod` of the world that
    continues `olds`, dealt when a source opens."""

    olds: tuple
    mod: int
    rem: int


@dataclass(frozen=True)
class Left:
    """What a reader of a Continued plan left: the replays it had not read, and its share's frontier (None: it had
    delivered nothing of its share)."""

    replays: tuple
    main: Position | None


def documents(source, order: StreamOrder, start: Position | None, plan: Position | None) -> Iterator[Document]:
    """The reader's documents: a Continued plan's replays, then its share (the source's stream), from `start`."""
    if not isinstance(plan, Continued):
        yield from source.stream(order, start, plan)
        return
    replays = plan.replays
    first = start.task if isinstance(start, InReplay) else len(replays) if start is not None else 0
    for task in range(first, len(replays)):
        yield from _replayed(source, order, task, replays[task], start.k if task == first and start else 0)
    yield from source.stream(order, None if isinstance(start, InReplay) else start, plan.main)


def _replayed(source, order: StreamOrder, task: int, replay: Replay, k: int) -> Iterator[Document]:
    """The untaken documents of `replay` from its `k`-th read on: the old reader's stream read again."""
    taken = decode_taken(replay.taken, replay.read)
    old = dataclasses.replace(order, readers=Shard(replay.mod, replay.rem))
    docs = documents(source, old, replay.start, replay.plan)
    try:
        for number, doc in enumerate(islice(docs, replay.read)):
            if number >= max(k, replay.past) and not taken[number]:
                doc.resume, doc.delivered = InReplay(task, number, doc.resume), 0
                yield doc
    finally:
        docs.close()


def frontier(source, plan: Position | None, cursor: Position, delivered: int, tokens: int) -> Position | Left:
    """Where a reader dealt `plan` stood when its last batch ended `delivered` tokens into the document at `cursor`:
    the source's frontier, or, for a Continued plan, what it left (`Left`)."""
    if not isinstance(plan, Continued):
        return source.frontier(cursor, delivered, tokens)
    if isinstance(cursor, InReplay):  # (inside a replay: best-fit rows, whose documents end whole in a batch)
        past = cursor.k + 1 if delivered >= tokens else cursor.k
        rest = (dataclasses.replace(plan.replays[cursor.task], past=past),) + plan.replays[cursor.task + 1:]
        return Left(rest, None)
    return Left((), source.frontier(cursor, delivered, tokens))


def dealt(source, plan: Position | None, order: StreamOrder) -> Position | None:
    """`plan`, or, for a Pending one, what it deals now."""
    if not isinstance(plan, Pending):
        return plan
    return deal(source, list(plan.olds), dataclasses.replace(order, readers=Shard(plan.mod, plan.rem)))


def deal(source, olds: list[OldReader], order: StreamOrder) -> Position:
    """The plan of the reader `order.readers` of a new world that continues `olds` (every reader of the old world,
    in order): the source's share of what their frontiers left, and the replays they left (their buffers' untaken
    documents, the replays they had not read), each dealt whole to one new reader by the rule shares follow."""
    mains, replays = [], []
    for old in olds:
        plan = dealt(source, old.plan, dataclasses.replace(order, readers=Shard(old.mod, old.rem)))
        front = None if old.cursor is None else frontier(source, plan, old.cursor, old.delivered, old.tokens)
        if isinstance(plan, Continued):
            left = front if front is not None else Left(plan.replays, None)
            replays += left.replays
            mains.append((plan.main, left.main))
        else:
            mains.append((plan, front))
        if old.held_from is not None:
            replays.append(Replay(plan, old.mod, old.rem, old.held_from, old.held_read, old.held_taken))
    main = source.plan_for(mains, order)
    n, m, count = order.readers.mod, order.readers.rem, len(replays)
    mine = tuple(replays[m * count // n:(m + 1) * count // n])
    return Continued(mine, main) if mine else main

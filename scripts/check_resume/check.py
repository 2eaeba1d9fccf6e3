"""The property every case must hold, against an uninterrupted run of the same world:
- the world kept: each rank's items before its state was taken, then those of the rank resumed from it, are the
  uninterrupted rank's, byte for byte (a DataLoader whose pass ended before its state was taken resumes with a
  whole new pass, as torch's DataLoader begins one with each iteration);
- another world resuming every rank's state: counted per document (each token says which it is of: data.py), over both
  worlds, no document of a source read once (not cycled) is delivered more than the source holds it: with stream
  packing, no more of its tokens than its length times the epochs; with rows that start at documents, no more
  placements in rows than the epochs; for a single source, nothing is missing but what the readers' last partial
  batches hold.

    check(case)            # raises Mismatch, naming the rank and the first item that differs
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from fwe_cli.errors import FweError
from fwe_cli.loader.shard import Shard
from scripts.check_resume.cases import Case
from scripts.check_resume.data import Made, make_data
from scripts.check_resume.runs import carried, run


class Mismatch(AssertionError):
    """What a case broke."""


class Unfit(Exception):
    """A case its data makes unreadable, resumed or not."""


def check(case: Case) -> None:
    """Run `case` and hold it to the property (see the module docstring). Unfit when the uninterrupted run itself
    refuses the case (a cycled source the split leaves empty, say): that is the data's doing, not a resume's."""
    with tempfile.TemporaryDirectory(prefix="fwe-check-resume-") as tmp:
        made = make_data(case, Path(tmp))
        world = [Shard(case.ranks, r) for r in range(case.ranks)]
        try:
            wholes = [run(made, case, shard, case.workers)[0] for shard in world]
        except FweError as exc:
            raise Unfit(f"the uninterrupted run refuses the case: {exc}") from exc
        firsts, states = [], []
        for shard, cut in zip(world, case.cut):
            items, state = run(made, case, shard, case.workers, limit=cut)
            firsts.append(items)
            states.append(carried(state, case.serial))
        if case.new_ranks is None:
            for shard, whole, first, state, cut in zip(world, wholes, firsts, states, case.cut):
                rest, _ = run(made, case, shard, case.workers, state=state)
                if case.adapter == "dataloader" and len(first) < cut:  # its pass ended: a DataLoader's next is new
                    whole = whole + whole
                _same(shard, whole, first + rest, len(first))
        else:
            news = [run(made, case, Shard(case.new_ranks, m), case.new_workers, world=states)[0]
                    for m in range(case.new_ranks)]
            _once(made, case, firsts, news)


def _same(shard: Shard, whole: list[bytes], got: list[bytes], cut: int) -> None:
    if got == whole:
        return
    differs = next((i for i, (a, b) in enumerate(zip(got, whole)) if a != b), min(len(got), len(whole)))
    raise Mismatch(f"rank {shard.rem} of {shard.mod}: stopped after {cut} items and resumed, {len(got)} items against "
                   f"{len(whole)} uninterrupted; item {differs} differs")


def _once(made: Made, case: Case, firsts: list[list[bytes]], news: list[list[bytes]]) -> None:
    """Another world resumed: counted per document over both worlds (see the module docstring)."""
    items = [np.frombuffer(item, dtype=np.int64) for stream in firsts + news for item in stream]
    rows = case.pack != "stream"  # rows that start at documents: each placement of a document is one run of its ids
    counts: Counter = Counter()
    for item in items:
        if rows:
            for row in item.reshape(-1, case.seq_len):
                cuts = np.flatnonzero(np.diff(row)) + 1
                counts.update(made.owner.get(int(run[0])) for run in np.split(row, cuts))
        else:
            counts.update(made.owner.get(int(t)) for t in item)
    counts.pop(None, None)  # end-of-text
    cycled = {n for n, stop in enumerate(case.stops) if stop == "cycle"}
    owed = {tag: case.epochs * (1 if rows else made.sizes[tag]) for tag in made.universe}
    what = "placements" if rows else "tokens"
    over = sorted((tag, n, owed.get(tag)) for tag, n in counts.items()
                  if tag[0] not in cycled and n > owed.get(tag, 0))
    if over:
        raise Mismatch(f"documents delivered more than the source holds them over both worlds ({what}, delivered, "
                       f"held): {over[:5]} ({len(over)} in all)")
    if case.mixed:
        return  # (a mix ends when a source read once ends on a reader: what the others held is not owed)
    readers = case.ranks * max(case.workers, 1) + case.new_ranks * max(case.new_workers, 1)
    tail = case.batch_size * (case.seq_len // 2 + 1) if rows else case.batch_size * case.seq_len
    missing = sum(owed[tag] - counts[tag] for tag in made.universe)
    if missing > readers * tail:
        raise Mismatch(f"{missing} {what} missing over both worlds, more than the readers' last partial batches hold "
                       f"({readers} readers, at most {tail} a batch)")

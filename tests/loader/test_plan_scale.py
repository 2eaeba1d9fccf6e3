"""Dealing at internet scale, from metadata of the real shapes (no file is read): FineWeb-Edu's sample-10BT (14 files
of about 2 GB, about 9,700 row groups) and its full listing (thousands of files), for 1,024 ranks x 8 DataLoader
workers. Every reader's share is a stretch of the epoch's line, the stretches tile it, a reader touches a unit or
two, a changed world re-deals exactly what the old one left, and a reader's state stays under 8 KB. (How long the
plan takes is a benchmark's figure: python -m scripts.bench.plan_scale.)"""

from __future__ import annotations

import random

import orjson
import pytest

from fwe_cli.loader.hub.source import HubRowPosition
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.deal import Frontier, Leftovers, fresh, leaf_share, leftover
from fwe_cli.loader.sources.order import Cursor, StreamOrder, Window
from fwe_cli.loader.sources.position import encode
from fwe_cli.loader.sources.units import BLOCK_BYTES, Unit, epoch_layout
from scripts.bench.plan_scale import full_listing, row_groups, sample_10bt

READERS = 1024 * 8
STATE_BYTES = 8 * 1024


def _check_tiling(layout, readers: int, sample: int = 64) -> None:
    """The readers' stretches tile the line; a sample of readers (the first, the last, some between) each get the
    pieces of their stretch only: as many units as it spans, plus the two it begins and ends inside."""
    total, previous = layout.total, 0
    for r in range(readers):
        (span,) = fresh(total, Shard(readers, r))
        assert span.lo == previous and span.hi >= span.lo
        previous = span.hi
    assert previous == total
    for r in sorted({0, readers - 1, *random.Random(13).sample(range(readers), sample)}):
        (span,) = fresh(total, Shard(readers, r))
        pieces = layout.pieces(span.lo, span.hi)
        assert sum(p.hi - p.lo for p in pieces) == span.hi - span.lo
        inside = [p for p in pieces[1:-1]]  # whole units between the two it may cut
        assert all((p.lo, p.hi) == (int(layout.lo[p.index]), int(layout.hi[p.index])) for p in inside)
        assert 1 <= len(pieces) <= 2 + (span.hi - span.lo) // min(int(u) for u in layout.hi - layout.lo)


@pytest.mark.parametrize("units", [sample_10bt, row_groups, full_listing], ids=["sample-10BT", "row-groups", "full"])
@pytest.mark.parametrize("seed", [None, 3])
def test_every_reader_of_1024x8_gets_its_stretch_of_units(units, seed):
    """sample-10BT's files, its ~9,700 row groups, the full listing's ~2,400 files, in order and shuffled (64 MiB
    blocks permuted): the 8,192 readers' stretches tile the epoch's line and each touches one to three units."""
    layout = epoch_layout(units(), seed, 0, BLOCK_BYTES)
    _check_tiling(layout, READERS)


def test_a_world_of_1024x8_resumes_on_1000x8_dealing_exactly_what_it_left():
    """Every reader of 1,024 x 8 stopped somewhere in its stretch of the full listing (inside a document, or at one's
    end); re-dealt to 1,000 x 8 readers, the new stretches hold exactly the old readers' leftovers, and every state
    involved (an old reader's, a new one's plan) is under 8 KB."""
    units = full_listing()
    layout = epoch_layout(units, 3, 0, BLOCK_BYTES)
    rng = random.Random(14)
    olds, left = [], []
    for r in range(READERS):
        spans = fresh(layout.total, Shard(READERS, r))
        x = rng.randrange(spans[0].lo, spans[0].hi)
        piece = layout.pieces(x, x + 1)[0]
        after = HubRowPosition(piece.file, rng.randrange(700), rng.randrange(1, 1000))
        window = Window(x, None, 1, x, after)
        front = Frontier(Cursor(0, 0, window, 0), rng.choice([0, 17, 400]), 400)
        state = {"position": {"doc": encode(front.cursor)}, "ended": [encode(front.cursor), front.delivered, 400],
                 "plan": None}
        assert len(orjson.dumps(state)) < STATE_BYTES
        olds.append((None, front))
        left += leftover(spans, front.cursor, front.delivered, front.tokens)
    new = [leaf_share(_Units(units), olds, _order(Shard(1000 * 8, m))) for m in (0, 4321, 7999)]  # as each reader does
    assert all(len(orjson.dumps(encode(share))) < STATE_BYTES for share in new)
    dealing = Leftovers(left)
    everything = [dealing.share(Shard(1000 * 8, m)) for m in range(1000 * 8)]
    assert [share.spans for share in new] == [(everything[m],) for m in (0, 4321, 7999)]
    dealt = sorted((s.lo, s.hi, s.rest) for spans in everything for s in spans)
    plain = [s for s in left if not s.rest]
    assert sorted((s.lo, s.hi, 1) for s in left if s.rest) == [d for d in dealt if d[2]]
    assert sum(s.hi - s.lo for s in plain) == sum(hi - lo for lo, hi, rest in dealt if not rest)


def _order(readers: Shard) -> StreamOrder:
    return StreamOrder(readers, 1, 3, 10_000)


class _Units:
    """What leaf_share asks of a source: its units."""

    def __init__(self, units: list[Unit]):
        self._units = units

    def units(self) -> list[Unit]:
        return self._units


def test_a_fresh_share_and_a_resumed_one_are_small(tmp_path):
    """A loader over 2,000 local files: its state after a batch, fresh and resumed on another world, is under 8 KB
    (a summary of the files, not their list)."""
    from fwe_cli.loader import FineWebLoader, resolve_config
    from tests.helpers import write_jsonl

    for n in range(2_000):
        write_jsonl(tmp_path / f"part{n:04d}.jsonl", [{"text": f"file {n} document {i} " * 3} for i in range(2)])
    config = resolve_config(env={}, local_path=str(tmp_path), tokenizer="byte", seq_len=64, batch_size=2)
    states = []
    for rank in range(2):
        with FineWebLoader(config.replace(shard=Shard(2, rank))) as loader:
            next(loader)
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    assert all(len(orjson.dumps(state)) < STATE_BYTES for state in states)
    with FineWebLoader(config.replace(shard=Shard(3, 1)), state=states) as loader:
        next(loader)
        assert len(orjson.dumps(loader.state_dict())) < STATE_BYTES

"""Benchmark: how long dealing takes at internet scale, and what a reader's state costs. From metadata of the real
shapes (no file is read): FineWeb-Edu's sample-10BT (14 files of about 2 GB; with a row filter, its ~9,700 row
groups) and its full listing (2,410 files), for 1,024 ranks x 8 DataLoader workers:

- plan: one reader's share of an epoch, as each reader makes it when its source opens (the epoch's line, in order
  or shuffled in 64 MiB blocks, then its stretch and the pieces of it);
- replan: one reader of a new world of 1,000 x 8 dealt what the 8,192 old readers left (sources.deal.leaf_share);
- state: FineWebLoader.state_dict() over 2,000 local files (the median of 200 taken after one batch, the CPU time of
  the calling thread), and its size.

    acceptance: plan <= 1 s per reader for every shape; a reader's state <= 8 KB and <= 50 us over 2,000 files

    python -m scripts.bench.plan_scale [--reps 5] [--out artifacts/bench]

Writes artifacts/bench/plan_scale-<UTC>.json.
"""

from __future__ import annotations

import random
import tempfile
import time

import orjson

from scripts.bench import harness
from scripts.bench.harness import say

NAME = "plan_scale"
READERS = 1024 * 8
PLAN_S, STATE_BYTES, STATE_S = 1.0, 8 * 1024, 50e-6


def sample_10bt():
    """14 files of 2.0-2.2 GB, as sample-10BT's listing gives them (sizes only: what dealing needs)."""
    from fwe_cli.loader.sources.units import Unit

    rng = random.Random(10)
    return [Unit(n, 0, rng.randrange(2_000_000_000, 2_200_000_000)) for n in range(14)]


def row_groups(files: int = 14, groups: int = 9_700):
    """sample-10BT's row groups, as a filtered source deals them: about 693 a file, each its extent in the file."""
    from fwe_cli.loader.sources.units import Unit

    rng, out = random.Random(11), []
    for file in range(files):
        start = 0
        for _ in range(groups // files):
            size = rng.randrange(1_500_000, 3_500_000)
            out.append(Unit(file, start, start + size))
            start += size
    return out


def full_listing():
    """FineWeb-Edu's full listing: 2,410 files of 1-2.3 GB."""
    from fwe_cli.loader.sources.units import Unit

    rng = random.Random(12)
    return [Unit(n, 0, rng.randrange(1_000_000_000, 2_300_000_000)) for n in range(2_410)]


SHAPES = {"sample-10BT": sample_10bt, "row-groups": row_groups, "full": full_listing}


def plan_once(units, seed, reader: int) -> float:
    from fwe_cli.loader.shard import Shard
    from fwe_cli.loader.sources.deal import fresh
    from fwe_cli.loader.sources.units import BLOCK_BYTES, epoch_layout

    started = time.perf_counter()
    layout = epoch_layout(units, seed, 0, BLOCK_BYTES)
    (span,) = fresh(layout.total, Shard(READERS, reader))
    layout.pieces(span.lo, span.hi)
    return time.perf_counter() - started


def replan_once(units, reader: int) -> float:
    """One new reader dealt from every old reader's frontier (each stopped somewhere in its stretch)."""
    from fwe_cli.loader.hub.source import HubRowPosition
    from fwe_cli.loader.shard import Shard
    from fwe_cli.loader.sources.deal import Frontier, fresh, leaf_share
    from fwe_cli.loader.sources.order import Cursor, StreamOrder, Window
    from fwe_cli.loader.sources.units import BLOCK_BYTES, epoch_layout

    layout = epoch_layout(units, 3, 0, BLOCK_BYTES)
    rng, olds = random.Random(14), []
    for r in range(READERS):
        (span,) = fresh(layout.total, Shard(READERS, r))
        x = rng.randrange(span.lo, span.hi)
        window = Window(x, None, 1, x, HubRowPosition(0, rng.randrange(700), rng.randrange(1, 1000)))
        olds.append((None, Frontier(Cursor(0, 0, window, 0), rng.choice([0, 17, 400]), 400)))

    class Listing:
        def units(self):
            return units

    started = time.perf_counter()
    leaf_share(Listing(), olds, StreamOrder(Shard(1000 * 8, reader), 1, 3, 10_000))
    return time.perf_counter() - started


def state_costs(files: int = 2_000, takes: int = 200) -> dict:
    """state_dict() after a batch, over `files` local files: its median seconds and its size."""
    from fwe_cli.loader import FineWebLoader, resolve_config

    with tempfile.TemporaryDirectory(prefix="bench-plan-scale-") as tmp:
        for n in range(files):
            with open(f"{tmp}/part{n:05d}.jsonl", "wb") as handle:
                handle.write(orjson.dumps({"text": f"file {n} " * 8}) + b"\n")
        config = resolve_config(env={}, local_path=tmp, tokenizer="byte", seq_len=64, batch_size=2)
        with FineWebLoader(config) as loader:
            next(loader)
            state = loader.state_dict()  # the first takes the files' summary (a stat each, once)
            times = []
            for _ in range(takes):
                started = time.thread_time()  # (the producer's threads run beside it: this thread's CPU alone)
                state = loader.state_dict()
                times.append(time.thread_time() - started)
    return {"files": files, "seconds": harness.median(times), "bytes": len(orjson.dumps(state))}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=5, help="runs of each measure (default 5)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    record: dict = {"readers": READERS, "plan": {}, "replan": {}}
    for name, make in SHAPES.items():
        units = make()
        for seed in (None, 3):
            label = f"{name}{'-shuffled' if seed is not None else ''}"
            times = [plan_once(units, seed, rep * 997 % READERS) for rep in range(args.reps)]
            record["plan"][label] = {"units": len(units), "seconds": harness.spread(times, 4)}
            say(f"plan {label}: {harness.median(times) * 1000:.1f} ms")
    times = [replan_once(full_listing(), rep * 1601 % 8000) for rep in range(args.reps)]
    record["replan"]["full-shuffled"] = {"old_readers": READERS, "seconds": harness.spread(times, 4)}
    say(f"replan full-shuffled: {harness.median(times) * 1000:.1f} ms")
    record["state"] = state_costs()
    say(f"state over 2,000 files: {record['state']['seconds'] * 1e6:.1f} us, {record['state']['bytes']} bytes")
    worst = max(entry["seconds"]["median"] for entry in record["plan"].values())
    record["acceptance"] = {
        "plan_s": {"max": worst, "target": PLAN_S, "ok": worst <= PLAN_S},
        "state_bytes": {"value": record["state"]["bytes"], "target": STATE_BYTES,
                        "ok": record["state"]["bytes"] <= STATE_BYTES},
        "state_s": {"value": record["state"]["seconds"], "target": STATE_S,
                    "ok": record["state"]["seconds"] <= STATE_S}}
    path = harness.write_result(NAME, args, record)
    say(f"acceptance {orjson.dumps(record['acceptance']).decode()}  ->  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

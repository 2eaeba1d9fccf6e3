"""How many requests a job's shape sends the Hub's resolver, which the Hub limits per 5 minutes (5,000 for a free
account, 3,000 anonymous; 429 beyond): `fwe doctor --ranks R --workers W --tokens-per-s T`, and the figures of
runbooks/many-ranks.md.

    plan = resolve_plan(sizes, row_groups=9_700, tokens=10e9, ranks=1024, workers=8, tokens_per_s=128e6)
    plan["after"]["per_5_min"], plan["before"]["per_5_min"], plan["nodes"], plan["epoch_s"]

The model follows how the readers are dealt (sources/deal.py): the files laid end to end by their sizes, reader r of
R = ranks x workers taking the stretch [rT/R, (r+1)T/R), a node's ranks (`ranks_per_node`, consecutive ranks) the
union of theirs. With the node's cache of resolved URLs (loader/remote/resolve_cache.py) a node resolves each file
its readers touch once per URL lifetime (less the refresh margin), all of them at the start (and, cold, the first
file, whose footer a node's listing reads ahead: hub/native.py's FooterAhead), and one branch check (a HEAD of the
card) per node on a warm start. With `--shuffle-seed` a node's stretch is blocks of every file, other
ones each epoch: it touches up to all files. Before it, every footer and row group read was a resolve (footers
once per node and file: the head cache is shared on disk), every epoch.
"""

from __future__ import annotations

import math

WINDOW_S = 300.0  # the Hub's rate-limit window
QUOTAS = {"free": 5_000, "anonymous": 3_000}
URL_LIFETIME_S = 3600.0  # the Hub's signed CDN URLs (X-Amz-Expires=3600)
RANKS_PER_NODE = 8
BLOCK_BYTES = 64 * 1024 * 1024  # a shuffle's blocks (sources.units.BLOCK_BYTES)


def _bounds(sizes: list[int]) -> list[tuple[int, int]]:
    at, out = 0, []
    for size in sizes:
        out.append((at, at + size))
        at += size
    return out


def files_per_node(sizes: list[int], nodes: int) -> list[int]:
    """How many files each node's stretch of the epoch's line (files end to end) touches."""
    total = sum(sizes)
    return [sum(1 for lo, hi in _bounds(sizes) if hi > lo and lo < (n + 1) * total / nodes and hi > n * total / nodes)
            for n in range(nodes)]


def read_spans(sizes: list[int], nodes: int, readers_per_node: int) -> list[list[float]]:
    """Per node, per file: the share of an epoch during which some reader of the node reads it (each reader reads
    its stretch at an even pace over the whole epoch)."""
    total, files = sum(sizes), _bounds(sizes)
    spans = []
    for node in range(nodes):
        per_file = []
        for lo, hi in files:
            times = []
            for k in range(readers_per_node):
                a = (node * readers_per_node + k) * total / (nodes * readers_per_node)
                b = (node * readers_per_node + k + 1) * total / (nodes * readers_per_node)
                if hi > a and lo < b:
                    times.append(((max(lo, a) - a) / (b - a), (min(hi, b) - a) / (b - a)))
            covered, end = 0.0, 0.0
            for first, last in sorted(times):  # the union of the readers' times in the file
                covered += max(0.0, last - max(first, end))
                end = max(end, last)
            per_file.append(covered if times else -1.0)  # -1: not touched
        spans.append(per_file)
    return spans


def resolve_plan(sizes: list[int], row_groups: int, tokens: float, ranks: int, workers: int, tokens_per_s: float,
                 ranks_per_node: int = RANKS_PER_NODE, url_lifetime_s: float = URL_LIFETIME_S,
                 shuffle: bool = False) -> dict:
    """Resolver requests of a job reading a dataset of files of `sizes` bytes (`row_groups` in all, `tokens` tokens)
    with `ranks` x `workers` readers at `tokens_per_s`: at its start, per epoch and in the worst 5-minute window, as
    fwe reads now (`after`) and with a resolve per read (`before`), against the Hub's quotas."""
    from fwe_cli.loader.remote.resolve_cache import REFRESH_MARGIN_S

    if not sizes or ranks < 1 or workers < 0 or tokens_per_s <= 0 or tokens <= 0 or ranks_per_node < 1:
        raise ValueError("need files, ranks >= 1, workers >= 0, tokens and tokens_per_s > 0, ranks_per_node >= 1")
    nodes = math.ceil(ranks / ranks_per_node)
    readers = ranks * max(1, workers)
    epoch_s = tokens / tokens_per_s
    usable_s = url_lifetime_s - min(REFRESH_MARGIN_S, url_lifetime_s / 4)
    spans = read_spans(sizes, nodes, readers // nodes)
    per_node = [sum(1 for share in node if share >= 0) for node in spans]
    pairs = [share for node in spans for share in node if share >= 0]  # (node, file) pairs: the share of an epoch
    ahead = sum(1 for node in spans if node[0] < 0)  # a cold listing reads the first file's footer on every node
    start = len(pairs) + ahead
    # a file a node reads for d seconds of an epoch is resolved ceil(d / usable) times (at least once); in a long run
    # a URL read again every epoch is resolved once per lifetime
    per_epoch = ahead + sum(max(1, math.ceil(share * epoch_s / usable_s)) for share in pairs)
    steady_rate = sum(1 / usable_s if epoch_s <= usable_s else math.ceil(share * epoch_s / usable_s) / epoch_s
                      for share in pairs)
    window = max(start, math.ceil(steady_rate * WINDOW_S))
    if shuffle:  # blocks of every file, other ones each epoch: a node's stretch of b blocks touches ~min(files, b)
        touched = min(len(sizes), math.ceil(sum(sizes) / BLOCK_BYTES / nodes))
        start = per_epoch = touched * nodes + ahead
        window = nodes * min(len(sizes), touched * math.ceil(WINDOW_S / epoch_s)) * math.ceil(WINDOW_S / usable_s)
    footers = len(pairs)  # before: once per node and file (the head cache on disk), and every row group, each epoch
    before_epoch = row_groups + footers
    before_window = max(readers, round(before_epoch * WINDOW_S / epoch_s))
    return {
        "shape": {"ranks": ranks, "workers": workers, "readers": readers, "ranks_per_node": ranks_per_node,
                  "tokens_per_s": tokens_per_s, "shuffle": shuffle},
        "dataset": {"files": len(sizes), "bytes": sum(sizes), "row_groups": row_groups, "tokens": tokens},
        "nodes": nodes, "epoch_s": round(epoch_s, 1), "url_lifetime_s": url_lifetime_s,
        "files_per_node": {"min": min(per_node), "max": max(per_node), "sum": sum(per_node)},
        "after": {"start": start, "start_warm": start - ahead + nodes, "per_epoch": per_epoch, "per_5_min": window,
                  "per_5_min_warm": window - ahead + nodes},
        "before": {"start": readers, "per_epoch": before_epoch, "per_5_min": before_window},
        "quota_5_min": QUOTAS,
        "fits": {name: max(window, window - ahead + nodes) <= quota for name, quota in QUOTAS.items()},
    }


def sample_10bt() -> tuple[list[int], int, float]:
    """FineWeb-Edu's sample-10BT as scripts/bench/plan_scale.py models it: 14 files of 2.0-2.2 GB, ~9,700 row
    groups, 10 B tokens (sizes from a seeded draw: the deal depends on sizes only)."""
    import random

    rng = random.Random(10)
    return [rng.randrange(2_000_000_000, 2_200_000_000) for _ in range(14)], 9_700, 10e9


def listing_shape(files: list[int], row_group_bytes: float = 2.9e6, tokens_per_byte: float = 10e9 / 29.5e9):
    """(sizes, row groups, tokens) of a listing known by its file sizes only (a cached listing): row groups and
    tokens estimated from sample-10BT's proportions (~2.9 MB a row group, ~0.34 tokens per parquet byte)."""
    total = sum(files)
    return files, max(len(files), round(total / row_group_bytes)), total * tokens_per_byte

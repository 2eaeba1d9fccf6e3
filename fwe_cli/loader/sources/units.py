"""Units: what a source is made of, known before anything is read, and an epoch's order of them (its line).

A source describes its data as units (`Source.units()`): extents [lo, hi) of its files, each in the file's own
coordinate (bytes; records for the synthetic source), from metadata alone: a listing's or a directory's file sizes, a
bootstrap's manifest, a token directory's manifest, parquet footers where a row filter rules row groups out. Every
document of a file is *anchored* at one coordinate: a JSONL or TXT line where it starts, a token shard's document
where its tokens start, a parquet row spread evenly over its row group's bytes (`parquet_rows`), a record at its
index; a gzip file, which cannot be read from its middle, anchors all its documents at its start (`whole`). An extent
owns the documents anchored in it, so extents that partition a file partition its documents, whoever reads them.

An epoch's line lays the units end to end: in listing order, or, shuffled, cut into blocks of at most the source's
`block` and permuted by (seed, epoch). A reader's share is a stretch of the line (sources.deal); `Layout.pieces`
turns a stretch back into file extents, a `Piece` each.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

BLOCK_BYTES = 64 * 1024 * 1024
"""A shuffled epoch permutes blocks of at most this many bytes: fine enough to mix a single large file, coarse enough
that a parquet row group cut by a block's edge (read by the readers of both blocks) stays rare."""


@dataclass(frozen=True, slots=True)
class Unit:
    """An extent [lo, hi) of file `file` (its number in the source's own listing)."""

    file: int
    lo: int
    hi: int
    whole: bool = False
    """Read from its start only (gzip): every document is anchored at `lo`, so one reader reads it all."""


@dataclass(frozen=True, slots=True)
class Piece:
    """The part [lo, hi) of a unit that a stretch of the line covers: its documents are those anchored in it."""

    index: int
    """The unit's place on the epoch's line."""
    file: int
    lo: int
    hi: int
    line: int
    """Where `lo` lies on the line."""
    whole: bool = False

    def on_line(self, anchor: int) -> int:
        """The line coordinate of a document of this piece anchored at `anchor` (in the file's coordinate)."""
        return self.line + anchor - self.lo


class Layout:
    """An epoch's units in order, end to end (held as arrays: a listing of thousands of files plans in milliseconds)."""

    def __init__(self, files, lo, hi, whole):
        import numpy as np  # (a warm start's first request goes out before numpy is imported: hub_native)

        self.files = np.asarray(files, dtype=np.int64)
        self.lo = np.asarray(lo, dtype=np.int64)
        self.hi = np.asarray(hi, dtype=np.int64)
        self.whole = np.asarray(whole, dtype=bool)
        self.starts = np.concatenate([[0], np.cumsum(self.hi - self.lo)]).astype(np.int64)

    @classmethod
    def of(cls, units: list[Unit]) -> "Layout":
        return cls([u.file for u in units], [u.lo for u in units], [u.hi for u in units], [u.whole for u in units])

    @property
    def total(self) -> int:
        """The line's length: the sum of the units' extents."""
        return int(self.starts[-1])

    def __len__(self) -> int:
        return len(self.files)

    def pieces(self, lo: int, hi: int) -> list[Piece]:
        """The pieces of the units that [lo, hi) of the line covers, in line order (a whole unit is covered when its
        start is)."""
        import numpy as np

        if hi <= lo:
            return []
        first = max(int(np.searchsorted(self.starts, lo, side="right")) - 1, 0)
        last = int(np.searchsorted(self.starts, hi, side="left"))
        out = []
        for i in range(first, min(last, len(self.files))):
            start, end = int(self.starts[i]), int(self.starts[i + 1])
            u_lo = int(self.lo[i])
            if self.whole[i]:
                if lo <= start < hi:
                    out.append(Piece(i, int(self.files[i]), u_lo, int(self.hi[i]), start, True))
                continue
            a, b = max(lo, start), min(hi, end)
            if a < b:
                out.append(Piece(i, int(self.files[i]), u_lo + a - start, u_lo + b - start, a))
        return out


def epoch_layout(units: list[Unit], seed: int | None, epoch: int, block: int) -> Layout:
    """The line of epoch `epoch`: the units as listed, or with a seed cut into blocks of at most `block` (a whole
    unit stays one) and permuted by (seed, epoch), the same on every machine and run."""
    import numpy as np

    if seed is None:
        return Layout.of(units)
    files, los, his, wholes = [], [], [], []
    for u in units:
        if u.whole or u.hi - u.lo <= block:
            files.append(u.file), los.append(u.lo), his.append(u.hi), wholes.append(u.whole)
            continue
        cuts = list(range(u.lo, u.hi, block)) + [u.hi]
        for a, b in zip(cuts, cuts[1:]):
            files.append(u.file), los.append(a), his.append(b), wholes.append(False)
    order = permutation(len(files), "units", seed, epoch)
    return Layout(np.asarray(files, dtype=np.int64)[order], np.asarray(los, dtype=np.int64)[order],
                  np.asarray(his, dtype=np.int64)[order], np.asarray(wholes, dtype=bool)[order])


def permutation(n: int, *key: object) -> np.ndarray:
    """A permutation of range(n) fixed by `key` (hashed to a PCG64 seed: the same on every platform and run)."""
    import numpy as np

    digest = hashlib.blake2b(":".join(map(str, key)).encode(), digest_size=16).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "little"))).permutation(n)


def spread(extent: tuple[int, int], i: int, count: int) -> int:
    """The anchor of row i of a row group of `count` rows spread over the bytes `extent`: start + size * i // count."""
    return extent[0] + (extent[1] - extent[0]) * i // max(count, 1)


class RowGroups:
    """Where the rows of a parquet file lie in its bytes (from its footer): a row group's extent runs from its first
    byte to the next one's (the first from byte 0, the last to the file's end, its footer included), and its rows
    are spread evenly over it (`spread`): a row belongs to the piece its anchor falls in."""

    def __init__(self, starts: list[int], counts: list[int]):
        self.starts, self.counts = starts, counts
        """Each row group's first byte, then the file's size; each one's rows."""
        self.bases = [0]
        for count in counts:
            self.bases.append(self.bases[-1] + count)

    @classmethod
    def of(cls, metadata, size: int) -> "RowGroups":
        """A parquet file's of `size` bytes, from its metadata: a row group begins at the lowest page offset of its
        column chunks, never below the row group's before (so the extents tile the file)."""
        starts: list[int] = []
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            offsets = []
            for c in range(group.num_columns):
                column = group.column(c)
                offsets.append(column.data_page_offset)
                if column.has_dictionary_page and column.dictionary_page_offset is not None:
                    offsets.append(column.dictionary_page_offset)
            starts.append(min(max(min(offsets) if offsets else 0, starts[-1] if starts else 0), size))
        return cls(starts + [size], [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)])

    @property
    def total(self) -> int:
        return self.bases[-1]

    def extent(self, group: int) -> tuple[int, int]:
        return 0 if group == 0 else self.starts[group], self.starts[group + 1]

    def owned(self, group: int, lo: int, hi: int) -> tuple[int, int]:
        """The rows [first, end) of row group `group` anchored in [lo, hi)."""
        start, stop = self.extent(group)
        count = self.counts[group]

        def first(x: int) -> int:  # the first row anchored at or after x: ceil((x - start) * count / extent), clamped
            if x <= start:
                return 0
            if stop <= start:  # an empty extent: every row at its start
                return count
            return min(-(-(x - start) * count // (stop - start)), count)

        return first(lo), first(hi)

    def number(self, group: int, row: int) -> int:
        """The rows of the file before the one after row `row` (from 1) of row group `group`."""
        return self.bases[group] + row

    def anchor(self, k: int) -> int:
        """The anchor of the file's row k (from 0)."""
        group = min(bisect.bisect_right(self.bases, k) - 1, len(self.counts) - 1)
        return spread(self.extent(group), k - self.bases[group], self.counts[group])

"""A parquet object read by range reads: its footer fetched once per node (kept under fwe's cache by URL and version,
one process of a node fetching it while the others wait: remote.node_lock), then the reader's row groups' wanted
column chunks in range GETs of up to RUN_BYTES (AWS suggests 8-16 MB a GET: fewer requests, each paying its round
trip and the client's per-request work), the next one fetched while one is decoded (remote.range_file). A GET
covers consecutive row groups of the reader's plan only (the first alone, for a quick first batch), so a reader
fetches its share and no byte of a row group the filter rules out; the first GETs are smaller (run_bytes).
"""

from __future__ import annotations

import hashlib
import os
from typing import Callable

import pyarrow.parquet as pq

from fwe_cli.artifacts import write_atomic
from fwe_cli.errors import SourceError
from fwe_cli.loader.files.objects import known
from fwe_cli.loader.remote.hub_env import fwe_cache_dir
from fwe_cli.loader.remote.node_lock import node_lock
from fwe_cli.loader.remote.parquet_spans import column_span
from fwe_cli.loader.remote.range_file import AHEAD, CHUNK_BYTES, FOOTER_BYTES, RangeFile

LOCK_WAIT_S = 60.0
RUN_BYTES = CHUNK_BYTES  # one GET covers consecutive row groups up to this many bytes
GAP_BYTES = 1 << 20  # columns not read between two consecutive row groups' spans, fetched along (one GET, not two)


def run_bytes(run: int) -> int:
    """The most bytes the plan's GET number `run` covers: the first row group alone, then 512 KiB, 2 MiB and
    RUN_BYTES (a first batch waits for the first, and shares the link and the cores with the next ones)."""
    return 0 if run == 0 else RUN_BYTES >> 2 * max(0, 3 - run)


def footer_path(url: str, version: str | None) -> str:
    key = hashlib.sha256(f"{url}\0{version}".encode()).hexdigest()[:32]
    return os.path.join(fwe_cache_dir(), "store-footers", f"{key}.bin")


def footer(url: str) -> tuple[int, bytes]:
    """(its first byte, the bytes) of the object's footer: from this node's cache, else fetched and kept."""
    store, obj = known(url)
    path = footer_path(url, obj.version)
    found = _cached(path, obj.size)
    if found is not None:
        return found
    with node_lock(path + ".lock", LOCK_WAIT_S, f"another rank's footer of {url}"):
        found = _cached(path, obj.size)
        if found is not None:
            return found
        start = max(0, obj.size - FOOTER_BYTES)
        tail = store.read(obj, start, obj.size)
        if len(tail) < 8 or tail[-4:] != b"PAR1":
            raise SourceError(f"{url}: not a parquet file (no PAR1 footer)")
        need = int.from_bytes(tail[-8:-4], "little") + 8
        if need > len(tail):
            start = obj.size - need
            tail = store.read(obj, start, obj.size - len(tail)) + tail
        try:
            write_atomic(path, start.to_bytes(8, "little") + tail)
        except OSError:
            pass  # a cache that cannot be written costs the next reader a request
        return start, tail


def _cached(path: str, size: int) -> tuple[int, bytes] | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    start = int.from_bytes(data[:8], "little")
    return (start, data[8:]) if len(data) > 8 and start + len(data) - 8 == size else None


class RemoteParquet(pq.ParquetFile):
    """A parquet object: pyarrow reads it through a RangeFile; `plan(groups, columns)` names the row groups the
    reader will read in order and lays out their GETs, and reading one asks for its GET, the next one and those of
    the next AHEAD row groups in the background."""

    def __init__(self, url: str):
        store, obj = known(url)
        self.url = url
        self.ranges = RangeFile(url, obj.size, lambda a, b: store.read(obj, a, b), sequential=False)
        start, tail = footer(url)
        self.ranges.put(start, tail)
        try:
            super().__init__(self.ranges, pre_buffer=False)
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise SourceError(f"{url}: not a readable parquet file ({exc})") from exc
        self._plan: list[int] = []
        self._columns: list[str] | None = None
        self._runs: list[tuple[int, int]] = []  # the plan's GETs, [start, end) in the object
        self._run_of: dict[int, int] = {}  # a planned row group -> its GET
        self.on_last_get: Callable[[], None] | None = None
        """Called once the plan's last GET is asked for (the reader opens its next object then: files.read)."""

    def plan(self, groups: list[int], columns: list[str] | None) -> None:
        """The row groups the reader reads next, in order, and their columns: their GETs are laid out."""
        self._plan, self._columns = list(groups), columns
        self._runs, self._run_of = [], {}
        previous = None
        for group in self._plan:
            start, end = self._span(group)
            if (previous == group - 1 and 0 <= start - self._runs[-1][1] <= GAP_BYTES
                    and end - self._runs[-1][0] <= run_bytes(len(self._runs) - 1)):
                self._runs[-1] = (self._runs[-1][0], end)
            else:
                self._runs.append((start, end))
            self._run_of[group] = len(self._runs) - 1
            previous = group

    def fetch_first(self) -> None:
        """Ask for the plan's first GETs now (a reader about to move on to this object)."""
        for start, end in self._runs[:2]:
            self.ranges.want(start, end)

    def _span(self, group: int) -> tuple[int, int]:
        row_group = self.metadata.row_group(group)
        names = self._columns or [self.metadata.schema.column(i).path.split(".")[0]
                                  for i in range(self.metadata.num_columns)]
        return column_span(row_group, names)

    def read_row_group(self, i, columns=None, use_threads=False, use_pandas_metadata=False):
        if i in self._run_of:  # its GET and the next, and those of the next AHEAD row groups
            at, run = self._plan.index(i), self._run_of[i]
            wanted = {run, run + 1} | {self._run_of[group] for group in self._plan[at:at + AHEAD + 1]}
            for index in sorted(r for r in wanted if r < len(self._runs)):
                self.ranges.want(*self._runs[index])
            self.ranges.forget(self._runs[run][0])
            if len(self._runs) - 1 in wanted and self.on_last_get is not None:
                self.on_last_get()
        return super().read_row_group(i, columns=columns, use_threads=use_threads,
                                      use_pandas_metadata=use_pandas_metadata)

    def iter_batches(self, batch_size=65536, row_groups=None, columns=None, **kwargs):
        groups = list(range(self.num_row_groups)) if row_groups is None else list(row_groups)
        self.plan(groups, columns)
        for group in groups:
            yield from self.read_row_group(group, columns=columns).to_batches(batch_size)

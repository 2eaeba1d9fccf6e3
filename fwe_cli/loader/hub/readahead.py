"""Read a Hub listing's parquet files with HTTP range requests: each footer, then only the wanted columns' bytes of
each row group, fetched ahead on a background thread into a bounded queue.

The read-ahead thread (`fwe-hub-readahead`) walks a reader's pieces (sources.units) in order, and in each the row
groups holding its rows: for a whole file, first the row groups the head cache holds decoded (hub.head_cache), then
one range request for the file's footer (its last 64 KiB, more only when the metadata is larger; cached too) and one
per row group covering the wanted column chunks
(in FineWeb-Edu `text` and `id` are the first two columns, so the span is contiguous and holds nothing else). With a
row filter (sources.where) its columns are read too, and a row group whose statistics in the footer rule every row
out is not fetched at all (the consumer counts it; the rows of the others are filtered by the source). The
consumer decodes each fetched row group from memory with pyarrow, and keeps the stream's first ones decoded in the
head cache. At most `READ_AHEAD_GROUPS` row groups wait in the queue, which bounds memory; `close()` stops the
thread without waiting for a read in flight (it is a daemon and its result is dropped), so a process ends promptly
after its last batch.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Iterator

from fwe_cli.errors import SourceError
from fwe_cli.loader.flow.handoff import END, Failure, Handoff
from fwe_cli.loader.flow.stages import note
from fwe_cli.loader.hub.head_cache import TEXT_COLUMNS, HeadCache
from fwe_cli.loader.hub.listing import HubFile, HubListing
from fwe_cli.loader.hub.ranges import Ranges, fetch_range, parquet_footer
from fwe_cli.loader.hub.source import HubRowPosition
from fwe_cli.loader.remote.hub_env import resolve_url
from fwe_cli.loader.remote.parquet_spans import column_span
from fwe_cli.loader.sources.units import Piece, RowGroups, spread
from fwe_cli.loader.sources.where import Filtered

READ_AHEAD_GROUPS = 4
GATE_POLL_S = 0.05  # how often a gated read re-checks its condition (it is also woken when the condition changes)


class _Stopped(Exception):
    """close() was called before a network read could start: the read-ahead ends without one."""


class HubParquetReader:
    """Iterate the rows of `pieces` of a listing's files (sources.units: a row belongs to the piece its place in its
    row group's bytes falls in), a row group's decoded columns at a time."""

    def __init__(self, listing: HubListing, pieces: list[Piece], at: HubRowPosition | None = None,
                 columns: tuple[str, ...] = TEXT_COLUMNS, read_ahead: int = READ_AHEAD_GROUPS,
                 head: HeadCache | None = None, floors: dict[int, HubRowPosition] | None = None,
                 fail_fast: bool = False, filtered: Filtered | None = None):
        self.filtered = filtered
        """The source's filter and its counts (None: no filter): its columns are read, its row groups skipped."""
        self.where = filtered.where if filtered is not None else None
        self.columns = tuple(dict.fromkeys((*columns, *(self.where.columns if self.where else ()))))
        self.listing = listing
        self.pieces = pieces
        self.head = head
        """Where footers and the first row groups are kept and found again (None: always the network)."""
        self.at = at
        """The first piece's rows are read after this position (of its file), when given."""
        self.floors = dict(floors or {})
        """Per listing file, the position its rows are read after (a file whose first rows are read from
        elsewhere: a local bootstrap)."""
        self.fail_fast = fail_fast
        """A Hub that cannot be reached fails the read at once instead of after the retries (transient.py)."""
        self.fetched = 0
        """Bytes of row groups fetched from the Hub (footers apart)."""
        self._serving = head is not None  # read-ahead thread: the row groups so far came from the head cache
        # consumer: the row groups so far are whole and in the head cache's order (a stream's first ones)
        self._keeping = head is not None and at is None and bool(pieces) and pieces[0].lo == 0
        self._handoff = Handoff(read_ahead)
        self._stop = self._handoff.stopped
        # in its creator's context: its range reads keep the loader's retry scope (transient.RetryScope)
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._read_ahead,),
                                        name="fwe-hub-readahead", daemon=True)
        self._started = False
        # The gate: until the loader's consumer asks for a second batch, work past the head cache's rows (a network
        # read, a footer parse, which imports pyarrow) starts only when the tokenizer is waiting for it. A first
        # batch then costs exactly the requests and imports it needs (warm: none past the cache), a run that stops
        # after it (smoke) starts none it will not use, and reading ahead starts with the second (`read_ahead_now`).
        self._gate = threading.Condition()
        self._open = False
        self._consumer_waiting = False

    def _pass_gate(self) -> None:
        with self._gate:
            while not (self._open or self._stop.is_set() or (self._consumer_waiting and self._handoff.empty())):
                self._gate.wait(GATE_POLL_S)
        if self._stop.is_set():
            raise _Stopped()

    def _read_footer(self, url: str, file: HubFile, start: int, end: int) -> bytes:
        """Footer bytes [start, end) of a file: from the head cache when there, else fetched (and kept)."""
        data = self.head.get(file.path, start, end) if self.head is not None else None
        if data is None:
            self._pass_gate()
            data = fetch_range(url, start, end, self.fail_fast)
            if self.head is not None:
                self.head.put(file.path, start, data)
        return data

    def _floor(self, number: int, piece: Piece) -> tuple[int, int]:
        """(row group, rows of it read) after which the piece's rows begin: the reader's `at` for the first piece, a
        file's floor, or (0, 0)."""
        floors = [self.floors.get(piece.file)]
        if number == 0 and self.at is not None and self.at.file == piece.file:
            floors.append(self.at)
        return max([(f.group, f.row) for f in floors if f is not None], default=(0, 0))

    def _cached_rows(self, number: int, file: HubFile, floor: tuple[int, int]) -> tuple[int, bool]:
        """For a piece of a whole file: queue the row groups the head cache holds from the floor's on (no footer, no
        pyarrow needed); (next group, whether the file is done)."""
        group = floor[0]
        while self._serving:
            hit = self.head.get_rows(file.path, group, self.columns)
            if hit is None:
                self._serving = False
                break
            columns, last, extent = hit
            count = len(next(iter(columns.values()), ()))
            first = floor[1] if group == floor[0] else 0
            if not self._handoff.put(("rows", number, group, columns, first, count, count, last, extent)):
                raise _Stopped()
            group += 1
            if last:
                return group, True
        return group, False

    def _read_ahead(self) -> None:
        try:
            footers: dict[int, tuple] = {}
            sent = None
            for number, piece in enumerate(self.pieces):
                file = self.listing.files[piece.file]
                floor = self._floor(number, piece)
                whole = piece.lo == 0 and piece.hi >= file.size
                next_group = 0
                if whole and self._serving:
                    next_group, done = self._cached_rows(number, file, floor)
                    if done:
                        continue
                if piece.file not in footers:
                    self._pass_gate()  # the footer parse below imports pyarrow
                    url = resolve_url(self.listing.repo, self.listing.revision, file.path)
                    metadata, footer_start, footer = parquet_footer(url, file, self._read_footer)
                    schema = metadata.schema.to_arrow_schema()
                    names = [n for n in self.columns if n in schema.names]
                    if "text" not in names:
                        raise SourceError(f"{file.path}: parquet file has no 'text' column")
                    if self.where is not None:
                        self.where.check_schema(schema.names, {f.name: f.type for f in schema}, file.path)
                    footers = {piece.file: (url, metadata, footer_start, footer, names,
                                            RowGroups.of(metadata, file.size))}
                url, metadata, footer_start, footer, names, groups = footers[piece.file]
                if sent != piece.file:
                    if not self._handoff.put(("file", number, metadata, footer_start, footer, names)):
                        return
                    sent = piece.file
                for group in range(max(next_group, floor[0]), metadata.num_row_groups):
                    if groups.extent(group)[0] >= piece.hi:
                        break  # (extents follow one another: the rest lie past the piece)
                    first, end = groups.owned(group, piece.lo, piece.hi)
                    if group == floor[0]:
                        first = max(first, floor[1])
                    if first >= end:
                        continue
                    row_group = metadata.row_group(group)
                    last = group == metadata.num_row_groups - 1
                    if self.where is not None and not self.where.may_match(row_group):
                        if not self._handoff.put(("skip", number, group, end - first)):
                            return
                        continue
                    start, stop = column_span(row_group, names)
                    self._pass_gate()
                    data = fetch_range(url, start, stop, self.fail_fast)
                    self.fetched += len(data)
                    if not self._handoff.put(("group", number, group, start, data, first, end, groups.counts[group],
                                              last, groups.extent(group))):
                        return
            self._handoff.put(END)
        except _Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - everything reaches the consumer
            self._handoff.put(Failure(exc))

    def starts_from_cache(self) -> bool:
        """Whether the reader's first row group is in the head cache (then nothing needs pyarrow before it)."""
        if self.head is None or not self.pieces:
            return False
        piece = self.pieces[0]
        file = self.listing.files[piece.file]
        return piece.lo == 0 and piece.hi >= file.size and \
            self.head.has_rows(file.path, self._floor(0, piece)[0], self.columns)

    def read_ahead_now(self) -> None:
        """Open the gate: read ahead freely from now on."""
        with self._gate:
            self._open = True
            self._gate.notify_all()

    def _get(self):
        """The next queued item; while it waits on an empty queue, the consumer lets the read-ahead go past the gate."""
        if self._handoff.empty():
            with self._gate:
                self._consumer_waiting = True
                self._gate.notify_all()
        try:
            return self._handoff.get()
        finally:
            self._consumer_waiting = False

    def start_reading(self) -> None:
        """Start the read-ahead thread now (iterating starts it otherwise): a stream that serves other documents first
        has its first row groups fetched meanwhile, as far as the gate lets it."""
        if not self._thread.is_alive() and not self._stop.is_set() and self._thread.ident is None:
            self._thread.start()

    def __iter__(self) -> Iterator[tuple[int, int, dict[str, list], int, int, int, bool, tuple[int, int]]]:
        """(piece number, row group, {column: values} of the whole row group, first row, end row (the piece's rows of
        it), its rows, whether it is its file's last, its extent in the file's bytes) for each row group read, in
        order."""
        if self._started:
            raise RuntimeError("a HubParquetReader is iterated once")
        self._started = True
        self.start_reading()
        view = parquet = names = file = None
        try:
            while True:
                note("source_read")  # the producer's stage (flow.stages): waiting for the network, then decoding
                item = self._get()
                if item is END:
                    return
                if isinstance(item, Failure):
                    raise item.exc
                if item[0] == "rows":
                    yield item[1:]
                    continue
                if item[0] == "file":
                    import pyarrow.parquet as pq

                    _, number, metadata, footer_start, footer, names = item
                    file = self.listing.files[self.pieces[number].file]
                    view = Ranges(file.path, file.size)
                    view.put(footer_start, footer)
                    parquet = pq.ParquetFile(view, metadata=metadata, pre_buffer=False)
                    continue
                if item[0] == "skip":  # ruled out by its statistics: not fetched, and the head cache's prefix ends
                    self.filtered.skip_row_group(item[3])
                    self._keeping = False
                    continue
                _, number, group, start, data, first, end, count, last, extent = item
                note("parse")
                view.put(start, data)
                # in this thread: pyarrow's own decode threads, left alive at interpreter exit, abort the process
                # ("terminate called without an active exception") in a few runs in a hundred
                table = parquet.read_row_group(group, columns=names, use_threads=False)
                view.drop(keep=1)
                columns = {name: table.column(name).to_pylist() for name in names}
                if self._keeping:  # the stream's first row groups, whole and in order: kept while the budget lasts
                    self._keeping = first == 0 and end == count and \
                        self.head.put_rows(file.path, group, columns, last, extent, self.columns)
                yield number, group, columns, first, end, count, last, extent
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading ahead; a range read in flight is abandoned, not awaited. Safe from another thread: a
        consumer waiting for the next row group wakes up and its iteration ends."""
        with self._gate:
            self._handoff.stop()
            self._gate.notify_all()


def iter_rows(reader: HubParquetReader) -> Iterator[tuple[dict, HubRowPosition, int]]:
    """The reader's rows as ({'text': ..., 'id': ...} (the columns it has, a filter's too), position after the row,
    its anchor on the line), in order (row groups its filter skipped are not among them)."""
    for number, group, columns, first, end, count, _last, extent in reader:
        piece = reader.pieces[number]
        names = list(columns)
        for i, values in enumerate(zip(*columns.values())):
            if first <= i < end:
                yield dict(zip(names, values)), HubRowPosition(piece.file, group, i + 1), \
                    piece.on_line(spread(extent, i, count))

"""Read a Hub listing's parquet files with HTTP range requests: each footer, then only the wanted columns' bytes of
each row group, fetched ahead on a background thread into a bounded queue.

The read-ahead thread (`fwe-hub-readahead`) walks the files and row groups in order: first the row groups the head
cache holds decoded (hub_head_cache), then, for the rest of a file, one range request for its footer (its last
64 KiB, more only when the metadata is larger; cached too) and one per row group covering the wanted column chunks
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
from fwe_cli.loader.handoff import END, Failure, Handoff
from fwe_cli.loader.stages import note
from fwe_cli.loader.sources.hub_head_cache import TEXT_COLUMNS, HeadCache
from fwe_cli.loader.sources.hub_listing import HubFile, HubListing
from fwe_cli.loader.hub_env import resolve_url
from fwe_cli.loader.sources.hub_ranges import Ranges, column_span, fetch_range, parquet_footer
from fwe_cli.loader.sources.hub_source import HubRowPosition
from fwe_cli.loader.sources.where import Filtered

READ_AHEAD_GROUPS = 4
GATE_POLL_S = 0.05  # how often a gated read re-checks its condition (it is also woken when the condition changes)


class _Stopped(Exception):
    """close() was called before a network read could start: the read-ahead ends without one."""


class HubParquetReader:
    """Iterate row groups as {column: list of values} (the `columns` a file has), over a listing's files in order."""

    def __init__(self, listing: HubListing, columns: tuple[str, ...] = TEXT_COLUMNS,
                 read_ahead: int = READ_AHEAD_GROUPS, head: HeadCache | None = None, start: tuple = (0, 0, 0),
                 first_rows: dict[int, tuple[int, int]] | None = None, fail_fast: bool = False,
                 filtered: Filtered | None = None):
        self.filtered = filtered
        """The source's filter and its counts (None: no filter): its columns are read, its row groups skipped."""
        self.where = filtered.where if filtered is not None else None
        self.columns = tuple(dict.fromkeys((*columns, *(self.where.columns if self.where else ()))))
        self.listing = listing
        self.head = head
        """Where footers and the first row groups are kept and found again (None: always the network)."""
        self.start = tuple(start)
        """(file number, row group, row) of the first row to read: a resumed stream skips what came before."""
        self.fail_fast = fail_fast
        """A Hub that cannot be reached fails the read at once instead of after the retries (transient.py)."""
        self.first_rows = dict(first_rows or {})
        """(row group, row) where reading begins in the listing's later files (default (0, 0)): a file whose first
        rows are read from elsewhere (a local bootstrap) is read from the Hub after them."""
        self._serving = head is not None  # read-ahead thread: the row groups so far came from the head cache
        # consumer: the row groups so far are all in the head cache (which keeps a prefix of the stream)
        self._keeping = head is not None and self.start == (0, 0, 0)
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

    def _cached_rows(self, index: int, file: HubFile, group: int) -> tuple[int, bool]:
        """Queue the row groups of `file` the head cache holds, from `group` on; (next group, whether the file is
        done)."""
        while self._serving:
            hit = self.head.get_rows(file.path, group, self.columns)
            if hit is None:
                self._serving = False
                break
            columns, last = hit
            if not self._handoff.put(("rows", index, group, columns, last)):
                raise _Stopped()
            group += 1
            if last:
                return group, True
        return group, False

    def _read_ahead(self) -> None:
        try:
            for index in range(self.start[0], len(self.listing.files)):
                file = self.listing.files[index]
                first, done = self._cached_rows(index, file, self.begins_at(index)[0])
                if done:
                    continue
                self._pass_gate()  # the footer parse below imports pyarrow
                url = resolve_url(self.listing.repo, self.listing.revision, file.path)
                metadata, footer_start, footer = parquet_footer(url, file, self._read_footer)
                schema = metadata.schema.to_arrow_schema()
                names = [n for n in self.columns if n in schema.names]
                if "text" not in names:
                    raise SourceError(f"{file.path}: parquet file has no 'text' column")
                if self.where is not None:
                    self.where.check_schema(schema.names, {f.name: f.type for f in schema}, file.path)
                if not self._handoff.put(("file", index, metadata, footer_start, footer, names)):
                    return
                for group in range(first, metadata.num_row_groups):
                    row_group = metadata.row_group(group)
                    last = group == metadata.num_row_groups - 1
                    if self.where is not None and not self.where.may_match(row_group):
                        if not self._handoff.put(("skip", group, row_group.num_rows)):
                            return
                        continue
                    start, end = column_span(row_group, names)
                    self._pass_gate()
                    if not self._handoff.put(("group", group, last, start, fetch_range(url, start, end, self.fail_fast))):
                        return
            self._handoff.put(END)
        except _Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - everything reaches the consumer
            self._handoff.put(Failure(exc))

    def begins_at(self, index: int) -> tuple[int, int]:
        """(row group, row) where reading file `index` of the listing begins."""
        start_file, start_group, start_row = self.start
        return (start_group, start_row) if index == start_file else self.first_rows.get(index, (0, 0))

    def starts_from_cache(self) -> bool:
        """Whether the stream's first row group is in the head cache (then nothing needs pyarrow before it)."""
        files = self.listing.files
        return self.head is not None and bool(files) and self.head.has_rows(files[0].path, 0, self.columns)

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

    def __iter__(self) -> Iterator[tuple[int, int, dict[str, list], bool]]:
        """(file number, row group, {column: values}, whether it is the file's last) for each row group read, in
        order from `start`'s."""
        if self._started:
            raise RuntimeError("a HubParquetReader is iterated once")
        self._started = True
        self.start_reading()
        view = parquet = names = file = None
        try:
            while True:
                note("source_read")  # the producer's stage (loader.stages): waiting for the network, then decoding
                item = self._get()
                if item is END:
                    return
                if isinstance(item, Failure):
                    raise item.exc
                if item[0] == "rows":
                    yield item[1], item[2], item[3], item[4]
                    continue
                if item[0] == "file":
                    import pyarrow.parquet as pq

                    _, number, metadata, footer_start, footer, names = item
                    file = self.listing.files[number]
                    view = Ranges(file.path, file.size)
                    view.put(footer_start, footer)
                    parquet = pq.ParquetFile(view, metadata=metadata, pre_buffer=False)
                    continue
                if item[0] == "skip":  # ruled out by its statistics: not fetched, and the head cache's prefix ends
                    self.filtered.skip_row_group(item[2])
                    self._keeping = False
                    continue
                _, group, last, start, data = item
                note("parse")
                view.put(start, data)
                # in this thread: pyarrow's own decode threads, left alive at interpreter exit, abort the process
                # ("terminate called without an active exception") in a few runs in a hundred
                table = parquet.read_row_group(group, columns=names, use_threads=False)
                view.drop(keep=1)
                columns = {name: table.column(name).to_pylist() for name in names}
                if self._keeping:  # the stream's first row groups, in order: kept decoded while the budget lasts
                    self._keeping = self.head.put_rows(file.path, group, columns, last, self.columns)
                yield number, group, columns, last
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading ahead; a range read in flight is abandoned, not awaited. Safe from another thread: a
        consumer waiting for the next row group wakes up and its iteration ends."""
        with self._gate:
            self._handoff.stop()
            self._gate.notify_all()


def iter_rows(reader: HubParquetReader) -> Iterator[tuple[dict, HubRowPosition]]:
    """The reader's rows as ({'text': ..., 'id': ...} (the columns it has, a filter's too), position after the row),
    in file and row order from the reader's start (row groups its filter skipped are not among them)."""
    for number, group, columns, _last in reader:
        names = list(columns)
        first_group, first_row = reader.begins_at(number)
        skip = first_row if group == first_group else 0
        for row, values in enumerate(zip(*columns.values()), start=1):
            if row > skip:
                yield dict(zip(names, values)), HubRowPosition(number, group, row)

"""Read a Hub listing's parquet files with HTTP range requests: each footer, then only the wanted columns' bytes of
each row group, fetched ahead on a background thread into a bounded queue.

The read-ahead thread (`fwe-hub-readahead`) walks the files and row groups in order: one range request for a file's
footer (its last 64 KiB, more only when the metadata is larger), then one per row group covering the wanted column
chunks (in FineWeb-Edu `text` and `id` are the first two columns, so the span is contiguous and holds nothing else).
The consumer decodes each row group from memory with pyarrow. At most `READ_AHEAD_GROUPS` fetched row groups wait
in the queue, which bounds memory; `close()` stops the thread without waiting for a read in flight (it is a daemon
and its result is dropped), so a process ends promptly after its last batch.
"""

from __future__ import annotations

import io
import queue
import threading
from typing import Callable, Iterator

from fwe_cli.errors import SourceError
from fwe_cli.loader.sources.hub_head_cache import HeadCache
from fwe_cli.loader.hub_env import endpoint
from fwe_cli.loader.sources.hub_listing import HubFile, HubListing
from fwe_cli.loader.transient import attempts_note, call_with_retries

FOOTER_PROBE = 64 * 1024
READ_AHEAD_GROUPS = 4
REQUEST_TIMEOUT_S = 30.0


def resolve_url(repo: str, revision: str, path: str) -> str:
    from urllib.parse import quote

    return f"{endpoint()}/datasets/{repo}/resolve/{revision}/{quote(path)}"


def fetch_range(url: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of `url` (redirects followed, as the Hub sends large files to a CDN); transient failures
    retried. A server that ignores Range and sends the whole body is sliced."""
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    def get() -> bytes:
        headers = build_hf_headers()
        headers["Range"] = f"bytes={start}-{end - 1}"
        response = get_session().get(url, headers=headers, follow_redirects=True, timeout=REQUEST_TIMEOUT_S)
        hf_raise_for_status(response)
        body = response.content
        if response.status_code == 200:
            body = body[start:end]
        if len(body) != end - start:
            raise SourceError(f"{url}: asked for bytes {start}-{end - 1}, got {len(body)} bytes")
        return body

    try:
        return call_with_retries(get, f"reading {url}")
    except SourceError:
        raise
    except Exception as exc:  # httpx/huggingface_hub raise many types; the cause stays chained
        raise SourceError(f"cannot read {url} (bytes {start}-{end - 1}){attempts_note(exc)}: {exc}") from exc


class _Ranges(io.RawIOBase):
    """A read-only file of known size whose bytes come only from ranges handed to it (pyarrow reads through it)."""

    def __init__(self, name: str, size: int):
        super().__init__()
        self.name, self._size, self._pos = name, size, 0
        self._ranges: list[tuple[int, bytes]] = []

    def put(self, start: int, data: bytes) -> None:
        self._ranges.append((start, data))

    def drop(self, keep: int = 0) -> None:
        """Forget all but the first `keep` ranges (the footer stays; row groups go once decoded)."""
        del self._ranges[keep:]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence] + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        for start, data in self._ranges:
            if start <= self._pos and end <= start + len(data):
                out = data[self._pos - start:end - start]
                self._pos = end
                return out
        raise SourceError(f"{self.name}: pyarrow asked for bytes {self._pos}-{end - 1}, which were not fetched")


def _metadata(url: str, file: HubFile, read: Callable[[str, HubFile, int, int], bytes]):
    """The parquet footer of one file: (pyarrow FileMetaData, footer start, footer bytes); `read` fetches ranges."""
    import pyarrow.parquet as pq

    start = max(0, file.size - FOOTER_PROBE)
    tail = read(url, file, start, file.size)
    if len(tail) < 8 or tail[-4:] != b"PAR1":
        raise SourceError(f"{url}: not a parquet file (no PAR1 footer)")
    need = int.from_bytes(tail[-8:-4], "little") + 8
    if need > len(tail):
        start = file.size - need
        tail = read(url, file, start, file.size - len(tail)) + tail
    view = _Ranges(url, file.size)
    view.put(start, tail)
    try:
        return pq.read_metadata(view), start, tail
    except Exception as exc:  # pyarrow's own error types
        raise SourceError(f"{url}: unreadable parquet footer ({exc})") from exc


def column_span(row_group, names: list[str]) -> tuple[int, int]:
    """[start, end) of the bytes of the named columns' chunks in one row group (dictionary pages included)."""
    starts, ends = [], []
    for j in range(row_group.num_columns):
        column = row_group.column(j)
        if column.path_in_schema.split(".")[0] not in names:
            continue
        first = column.data_page_offset
        if column.has_dictionary_page and column.dictionary_page_offset:
            first = min(first, column.dictionary_page_offset)
        starts.append(first)
        ends.append(first + column.total_compressed_size)
    return min(starts), max(ends)


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


_END = object()
GATE_POLL_S = 0.05  # how often a gated read re-checks its condition (it is also woken when the condition changes)


class _Stopped(Exception):
    """close() was called before a network read could start: the read-ahead ends without one."""


_CLOSED = object()  # put by close(): wakes a consumer waiting on the queue


class HubParquetReader:
    """Iterate pyarrow Tables, one per row group, of `columns` (those present) over a listing's files in order."""

    def __init__(self, listing: HubListing, columns: tuple[str, ...] = ("text", "id"),
                 read_ahead: int = READ_AHEAD_GROUPS, head: HeadCache | None = None):
        self.listing = listing
        self.columns = columns
        self.head = head
        """Where the first ranges read are kept and found again (None: always the network)."""
        self._caching = head is not None
        self._queue: queue.Queue = queue.Queue(maxsize=read_ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read_ahead, name="fwe-hub-readahead", daemon=True)
        self._started = False
        # The network gate: before the first batch is out, a range that is not in the head cache is fetched only
        # when the consumer is waiting for it. A first batch then costs exactly the requests it needs (warm: none
        # past the cache), and reading ahead starts once it is out (`first_batch_out`).
        self._gate = threading.Condition()
        self._open = False
        self._consumer_waiting = False

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _read(self, url: str, file: HubFile, start: int, end: int) -> bytes:
        """Bytes [start, end) of a file: from the head cache when there, else fetched (and kept while it has room:
        only a stream's first ranges are kept, so caching stops at the first range that does not fit)."""
        if self._caching:
            data = self.head.get(file.path, start, end)
            if data is not None:
                return data
        with self._gate:
            while not (self._open or self._stop.is_set() or (self._consumer_waiting and self._queue.empty())):
                self._gate.wait(GATE_POLL_S)
        if self._stop.is_set():
            raise _Stopped()
        data = fetch_range(url, start, end)
        if self._caching:
            self._caching = self.head.put(file.path, start, data)
        return data

    def _read_ahead(self) -> None:
        try:
            for index, file in enumerate(self.listing.files):
                url = resolve_url(self.listing.repo, self.listing.revision, file.path)
                metadata, footer_start, footer = _metadata(url, file, self._read)
                names = [n for n in self.columns if n in metadata.schema.to_arrow_schema().names]
                if "text" not in names:
                    raise SourceError(f"{file.path}: parquet file has no 'text' column")
                if not self._put(("file", index, metadata, footer_start, footer, names)):
                    return
                for group in range(metadata.num_row_groups):
                    start, end = column_span(metadata.row_group(group), names)
                    if not self._put(("group", group, start, self._read(url, file, start, end))):
                        return
            self._put(_END)
        except _Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - everything reaches the consumer
            self._put(_Failure(exc))

    def first_batch_out(self) -> None:
        """Open the network gate: read ahead freely from now on."""
        with self._gate:
            self._open = True
            self._gate.notify_all()

    def _get(self):
        """The next queued item; while it waits on an empty queue, the consumer lets the read-ahead fetch."""
        if self._queue.empty():
            with self._gate:
                self._consumer_waiting = True
                self._gate.notify_all()
        try:
            return self._queue.get()
        finally:
            self._consumer_waiting = False

    def __iter__(self) -> Iterator:
        import pyarrow.parquet as pq

        if self._started:
            raise RuntimeError("a HubParquetReader is iterated once")
        self._started = True
        self._thread.start()
        view = parquet = names = None
        try:
            while True:
                item = self._get()
                if item is _END or item is _CLOSED:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                if item[0] == "file":
                    _, index, metadata, footer_start, footer, names = item
                    view = _Ranges(self.listing.files[index].path, self.listing.files[index].size)
                    view.put(footer_start, footer)
                    parquet = pq.ParquetFile(view, metadata=metadata, pre_buffer=False)
                    continue
                _, group, start, data = item
                view.put(start, data)
                # in this thread: pyarrow's own decode threads, left alive at interpreter exit, abort the process
                # ("terminate called without an active exception") in a few runs in a hundred
                yield parquet.read_row_group(group, columns=names, use_threads=False)
                view.drop(keep=1)
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading ahead; a range read in flight is abandoned, not awaited. Safe from another thread: a
        consumer waiting for the next row group wakes up and its iteration ends."""
        with self._gate:
            self._stop.set()
            self._gate.notify_all()
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        try:
            self._queue.put_nowait(_CLOSED)
        except queue.Full:  # the read-ahead thread refilled it meanwhile: the consumer is not waiting then
            pass


def iter_rows(reader: HubParquetReader) -> Iterator[dict]:
    """The reader's rows as {'text': ..., 'id': ...} dicts (columns it has), in file and row order."""
    for table in reader:
        names = table.column_names
        columns = [table.column(name).to_pylist() for name in names]
        for values in zip(*columns):
            yield dict(zip(names, values))

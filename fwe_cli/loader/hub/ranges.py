"""Parquet over HTTP range requests: a Hub file's URL, a range of its bytes, its footer (the byte span of the wanted
columns in one row group is remote.parquet_spans's). The native Hub reader (hub.readahead) and bootstrap's downloads
use these.
"""

from __future__ import annotations

import io
from typing import Callable

from fwe_cli.errors import SourceError
from fwe_cli.loader.hub.listing import HubFile
from fwe_cli.loader.remote.transient import attempts_note, call_with_retries

FOOTER_PROBE = 64 * 1024
REQUEST_TIMEOUT_S = 30.0


def fetch_range(url: str, start: int, end: int, fail_fast: bool = False) -> bytes:
    """Bytes [start, end) of the Hub file at resolve URL `url`, read from its CDN URL as the node resolved it
    (remote.hub_get: one resolve per file and node; kept-alive connections); transient failures retried (a Hub
    that cannot be reached at all not, with `fail_fast`: the caller has a way out). From a host that ignores Range
    and sends the whole body, the bytes up to `end` are read and sliced."""
    from fwe_cli.loader.remote.hub_get import get

    def read() -> bytes:
        with get(url, {"Range": f"bytes={start}-{end - 1}"}, timeout=REQUEST_TIMEOUT_S) as answer:
            body = answer.read(end)[start:] if answer.status == 200 else answer.read()
        if len(body) != end - start:
            raise SourceError(f"{url}: asked for bytes {start}-{end - 1}, got {len(body)} bytes")
        return body

    try:
        return call_with_retries(read, f"reading {url}", fail_fast=fail_fast)
    except SourceError:
        raise
    except Exception as exc:  # the cause stays chained
        raise SourceError(f"cannot read {url} (bytes {start}-{end - 1}){attempts_note(exc)}: {exc}") from exc


class Ranges(io.RawIOBase):
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


def parquet_footer(url: str, file: HubFile, read: Callable[[str, HubFile, int, int], bytes]):
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
    view = Ranges(url, file.size)
    view.put(start, tail)
    try:
        return pq.read_metadata(view), start, tail
    except Exception as exc:  # pyarrow's own error types
        raise SourceError(f"{url}: unreadable parquet footer ({exc})") from exc

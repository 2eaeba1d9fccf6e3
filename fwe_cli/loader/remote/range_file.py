"""One object read as a seekable file whose bytes come by range reads, fetched ahead on a thread pool.

Two ways of reading it, both bounded in memory and in bytes fetched:
- sequential (JSONL, TXT, gzip lines): from wherever reading starts, chunks of CHUNK_BYTES (AWS suggests 8-16 MB a
  range GET) are fetched AHEAD at a time, up to `until` (the end of the reader's share of the file); past it, the line
  in progress is finished in TAIL_BYTES steps, so a reader fetches its share and one line more;
- by spans (parquet): `want(start, end)` fetches a row group's column chunks in one GET in the background (the
  reader asks for the next few ahead of the one it decodes), and a read nothing covers (pyarrow's footer read) is
  fetched at once, the footer's as one suffix of FOOTER_BYTES.
Fetched ranges behind the reading position are dropped (`forget`). Threads start in the caller's context (its
loader's retry scope), from one pool per process (a forked DataLoader worker makes its own).
"""

from __future__ import annotations

import contextvars
import io
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

CHUNK_BYTES = 8 << 20
AHEAD = 4
TAIL_BYTES = 64 << 10
FOOTER_BYTES = 64 << 10
POOL_THREADS = 16

_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def fetch_pool() -> ThreadPoolExecutor:
    """This process's pool of range reads."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="fwe-store-read"))
        return _pool[1]


class RangeFile(io.RawIOBase):
    """Bytes of an object of `size` bytes, `fetch(start, end)` reading a range of it."""

    def __init__(self, name: str, size: int, fetch: Callable[[int, int], bytes], sequential: bool = True,
                 until: int | None = None, chunk: int = CHUNK_BYTES, ahead: int = AHEAD):
        super().__init__()
        self.name, self._size, self._fetch = name, size, fetch
        self.sequential, self.chunk, self.ahead = sequential, chunk, ahead
        self.until = size if until is None else min(size, until)
        """Sequential reading fetches whole chunks up to here, small steps after."""
        self.fetched = 0
        """Bytes fetched."""
        self._pos = 0
        self._ranges: dict[int, tuple[int, Future]] = {}  # start -> (end, its bytes)
        self._planned = 0  # sequential: the end of the chunks asked for
        self._lock = threading.Lock()

    # -- io.RawIOBase -------------------------------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence] + offset
        if self.sequential:
            self._planned = max(self._pos, min(self._planned, self._pos))  # a jump restarts the plan there
        return self._pos

    def readinto(self, buffer) -> int:
        if self._pos >= self._size:
            return 0
        start, end, data = self._covering(self._pos, len(buffer))
        out = data[self._pos - start:min(end, self._pos + len(buffer)) - start]
        buffer[:len(out)] = out
        self._pos += len(out)
        if self.sequential:
            self.forget(self._pos)
        return len(out)

    def close(self) -> None:
        with self._lock:
            for _, future in self._ranges.values():
                future.cancel()
            self._ranges.clear()
        super().close()

    # -- ranges --------------------------------------------------------------------------------------------------------
    def want(self, start: int, end: int) -> None:
        """Fetch [start, end) in the background (one range read), unless it is fetched or asked for already."""
        end = min(end, self._size)
        with self._lock:
            if start >= end or any(s <= start and end <= e for s, (e, _) in self._ranges.items()):
                return
            self._ranges[start] = (end, self._submit(start, end))

    def put(self, start: int, data: bytes) -> None:
        """Bytes at `start` known already (a cached footer)."""
        future: Future = Future()
        future.set_result(data)
        with self._lock:
            self._ranges[start] = (start + len(data), future)

    def forget(self, before: int, keep_tail: bool = True) -> None:
        """Drop the ranges that end at or before `before` (the footer's, at the end, stays with `keep_tail`)."""
        with self._lock:
            for start in [s for s, (e, _) in self._ranges.items() if e <= before
                          and not (keep_tail and e == self._size and not self.sequential)]:
                del self._ranges[start]

    def _submit(self, start: int, end: int) -> Future:
        context = contextvars.copy_context()
        return fetch_pool().submit(context.run, self._get, start, end)

    def _get(self, start: int, end: int) -> bytes:
        data = self._fetch(start, end)
        with self._lock:
            self.fetched += len(data)
        return data

    def _covering(self, pos: int, n: int) -> tuple[int, int, bytes]:
        """(start, end, bytes) of a range holding `pos`, fetched or waited for; asked for now when none does (by
        spans: the `n` bytes read, at least TAIL_BYTES, or the footer's suffix)."""
        with self._lock:
            found = next(((s, e, f) for s, (e, f) in self._ranges.items() if s <= pos < e), None)
        if found is None:
            if self.sequential:
                self._plan(pos)
            else:
                start = max(0, self._size - FOOTER_BYTES) if pos >= self._size - FOOTER_BYTES else pos
                self.want(start, pos + max(n, TAIL_BYTES) if start == pos else self._size)
            with self._lock:
                found = next((s, e, f) for s, (e, f) in self._ranges.items() if s <= pos < e)
        elif self.sequential:
            self._plan(pos)
        start, end, future = found
        return start, end, future.result()

    def _plan(self, pos: int) -> None:
        """Sequential reading at `pos`: chunks asked for up to AHEAD ahead of it (to `until`), or one small step past
        `until`."""
        with self._lock:
            planned = self._planned if self._planned > pos else pos
            if any(s <= pos < e for s, (e, _) in self._ranges.items()):
                planned = max(planned, max(e for s, (e, _) in self._ranges.items() if s <= pos < e))
            while planned < self._size and (planned < self.until and planned < pos + self.ahead * self.chunk
                                            or planned <= pos):
                step = self.chunk if planned < self.until else TAIL_BYTES
                end = min(self._size, planned + step, self.until if planned < self.until else self._size)
                if not any(s <= planned < e for s, (e, _) in self._ranges.items()):
                    self._ranges[planned] = (end, self._submit(planned, end))
                planned = end
            self._planned = planned


def open_sequential(name: str, size: int, fetch: Callable[[int, int], bytes], start: int = 0,
                    until: int | None = None) -> io.BufferedReader:
    """A buffered reader of the object from byte `start`, fetching ahead up to `until` (None: its end)."""
    raw = RangeFile(name, size, fetch, sequential=True, until=until)
    reader = io.BufferedReader(raw, buffer_size=1 << 20)
    if start:
        reader.seek(start)
    return reader

"""Download byte ranges of a Hub listing's parquet files for `fwe bootstrap`, over several connections at once, into
sparse files that the converter reads row group by row group as their bytes land.

    fetcher = Fetcher(directory, connections=8)
    footer = fetcher.submit(lambda: fetch_range(url, a, b))   # a small job, ahead of every span
    download = fetcher.file(url, hub_file)                    # <directory>/<name>.part, the file's size, sparse
    download.put(footer_start, footer_bytes)                  # bytes fetched otherwise (the footer)
    download.add_spans([(0, a), (a, b)])                      # queued; the connections take spans in this order
    download.wait(start, end)                                 # once bytes [start, end) are on disk
    download.sha256()                                         # a whole file: the sha256 of every byte, in order
    fetcher.release(download)                                 # converted: its file is deleted
    fetcher.close()

A span is one GET with `Range: bytes=A-B`, written at its offset (os.pwrite) as it arrives, so a row group can be
converted while the bytes after it are still on the way; a cut connection goes on from the bytes received, 429/5xx
are retried as the Hub retry policy says. Spans are fetched in the order queued (the stream queues what it needs
first, first), at most `connections` at a time; one file's spans spread over every free connection, so a last file
downloads as fast as several files would.

What is checked: every span must bring exactly the bytes asked for; a file fetched whole is hashed in file order as
its bytes land (`sha256`, on a `fwe-hub-hash` thread) and the stream compares that with the listing's LFS sha256;
of a file read only in part, the stream records the sha256 of each row group it read (`range_sha256`).
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import os
import threading
import time
from concurrent.futures import Future
from typing import Callable

from fwe_cli.bootstrap.hub_range_get import Cancelled, fetch_span
from fwe_cli.loader.hub.listing import HubFile
from fwe_cli.output.os_errors import on_output

CONNECTIONS = 8  # what `hf download` opens by default: per-connection caps (CDNs) add up over this many
HASH_BLOCK = 1 << 20
JOIN_S = 5.0  # close(): how long to wait for the connection threads to see the stop
_SERIAL = itertools.count()


def local_name(file: HubFile) -> str:
    return file.path.replace("/", "--")


class FileDownload:
    """One file being fetched into `<directory>/<name>.part` (the file's full size, holes where nothing landed yet).
    The connection threads add bytes; the stream waits for ranges and reads them by path."""

    def __init__(self, url: str, file: HubFile, path: str, queue_span: Callable):
        self.url, self.file, self.path = url, file, path
        self._queue_span = queue_span
        self._landed: list[list[int]] = []  # [start, end, landed up to], sorted by start
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self.released = False
        self.key = f"{os.getpid()}-{next(_SERIAL)}"
        """Names this download of the file (a reader caching the file by path must not mix two of them)."""
        self._sha: Future | None = None
        with on_output("create", path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(fd, file.size)
            finally:
                os.close(fd)

    # -- bytes arriving (connection threads, or the stream for bytes it fetched itself) ---------------------------
    def _span(self, start: int, end: int) -> list[int]:
        span = [start, end, start]
        with self._cond:
            self._landed.append(span)
            self._landed.sort()
        return span

    def add_spans(self, spans: list[tuple[int, int]]) -> None:
        """Queue these byte ranges, in this order (each one GET)."""
        for start, end in spans:
            if end > start:
                self._queue_span(self, self._span(start, end))

    def put(self, start: int, data: bytes) -> None:
        """Bytes [start, start + len(data)) fetched some other way (a footer): written, and counted as landed."""
        span = self._span(start, start + len(data))
        self.write(span, start, data)

    def write(self, span: list[int], offset: int, data: bytes) -> None:
        fd = self._fd()
        try:
            with on_output("write", self.path):  # the disk's errors, not the network's: exit 8 or 7, not 4
                os.pwrite(fd, data, offset)
        finally:
            os.close(fd)
        with self._cond:
            span[2] = offset + len(data)
            self._cond.notify_all()

    def _fd(self) -> int:
        if self.released:
            raise Cancelled(self.url)
        with on_output("open", self.path):
            return os.open(self.path, os.O_WRONLY)

    def fail(self, exc: BaseException) -> None:
        with self._cond:
            self._error = self._error or exc
            self._cond.notify_all()

    # -- the stream's side ----------------------------------------------------------------------------------------
    def _covered(self, start: int, end: int) -> bool:
        at = start
        for first, _, landed in self._landed:
            if first > at:
                break
            at = max(at, landed)
            if at >= end:
                return True
        return at >= end

    def present(self, start: int, end: int) -> bool:
        """Whether bytes [start, end) have landed (the download's error raised, if it failed)."""
        with self._cond:
            if self._error is not None:
                raise self._error
            return self._covered(start, end)

    def wait(self, start: int, end: int) -> None:
        """Return once bytes [start, end) have landed; the download's error (SourceError) when it failed, Cancelled
        when it was released meanwhile."""
        with self._cond:
            while self.released or not self._covered(start, end):
                if self.released:
                    raise Cancelled(self.url)
                if self._error is not None:
                    raise self._error
                self._cond.wait(1.0)

    def sha256(self) -> str:
        """The sha256 of the whole file, hashed in order as its bytes land (started on first call, on its own
        thread); waits for the last byte."""
        self.start_hashing()
        return self._sha.result()

    def start_hashing(self) -> None:
        """Hash the bytes as they land, from now on (the file is fetched whole)."""
        with self._cond:
            if self._sha is None:
                self._sha = Future()
                threading.Thread(target=self._hash, name="fwe-hub-hash", daemon=True).start()

    def _hash(self) -> None:
        try:
            digest, at, size = hashlib.sha256(), 0, self.file.size
            with open(self.path, "rb", buffering=0) as handle:
                while at < size:
                    end = min(size, at + HASH_BLOCK)
                    self.wait(at, end)
                    digest.update(os.pread(handle.fileno(), end - at, at))
                    at = end
            self._sha.set_result(digest.hexdigest())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the hash
            self._sha.set_exception(exc)

    def range_sha256(self, start: int, end: int) -> str:
        """The sha256 of bytes [start, end), read back from the file (they must have landed)."""
        digest = hashlib.sha256()
        with open(self.path, "rb", buffering=0) as handle:
            for at in range(start, end, HASH_BLOCK):
                digest.update(os.pread(handle.fileno(), min(HASH_BLOCK, end - at), at))
        return digest.hexdigest()


class Fetcher:
    """`connections` threads (`fwe-hub-fetch-N`) taking jobs in priority order: small jobs (`submit`: a footer)
    first, then spans in the order queued. Errors go to whoever waits for the job (its Future, its download)."""

    def __init__(self, directory: str, connections: int = CONNECTIONS):
        self.directory = directory
        self._jobs: list = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        with on_output("prepare download folder", directory):
            os.makedirs(directory, exist_ok=True)
            for name in os.listdir(directory):  # an earlier run's downloads: what it needed is fetched again
                os.remove(os.path.join(directory, name))
        self._threads = [threading.Thread(target=self._run, name=f"fwe-hub-fetch-{i}", daemon=True)
                         for i in range(max(1, connections))]
        for thread in self._threads:
            thread.start()

    def _put(self, priority: int, job) -> None:
        with self._cond:
            heapq.heappush(self._jobs, (priority, next(self._order), job))
            self._cond.notify()

    def submit(self, fn: Callable[[], object]) -> Future:
        """Run `fn` on a connection thread before any span still queued; its result or error in the Future."""
        future: Future = Future()
        self._put(0, (future, fn))
        return future

    def file(self, url: str, file: HubFile) -> FileDownload:
        """A new download of `file` into the folder (nothing queued yet)."""
        return FileDownload(url, file, os.path.join(self.directory, local_name(file) + ".part"),
                            lambda download, span: self._put(1, (download, span)))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                _, _, (owner, work) = heapq.heappop(self._jobs)
            if isinstance(owner, Future):
                if owner.set_running_or_notify_cancel():
                    try:
                        owner.set_result(work())
                    except BaseException as exc:  # noqa: BLE001 - the waiter raises it
                        owner.set_exception(exc)
                continue
            if owner.released:
                continue
            try:
                fetch_span(owner.url, work, lambda offset, data, span=work, to=owner: to.write(span, offset, data),
                           self._stop)
            except BaseException as exc:  # noqa: BLE001 - the stream raises it when it waits for these bytes
                owner.fail(exc)

    def release(self, download: FileDownload) -> None:
        """The file is converted (or no longer wanted): its queued spans are dropped and its file deleted; a span
        in flight stops at its next block."""
        download.released = True
        download.fail(Cancelled(download.url))
        with on_output("remove", download.path):
            try:
                os.remove(download.path)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        """Stop every fetch (files stay for the caller to remove) and wait briefly for the threads to end."""
        self._stop.set()
        with self._cond:
            for _, _, (owner, _) in self._jobs:
                if isinstance(owner, Future):
                    owner.cancel()  # nobody is left to wait for it, but a waiter would not hang
            self._jobs.clear()
            self._cond.notify_all()
        deadline = time.monotonic() + JOIN_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def remove_tree(directory: str) -> None:
    """Delete the download folder and what is in it (after a complete run, or --force)."""
    if os.path.isdir(directory):
        with on_output("remove download folder", directory):
            for name in os.listdir(directory):
                os.remove(os.path.join(directory, name))
            os.rmdir(directory)

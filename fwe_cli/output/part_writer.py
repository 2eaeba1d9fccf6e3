"""One part of lines written crash-safely: appended under a temporary name, hashed, fsynced, then renamed (a
bootstrap's parts: `fwe bootstrap`, and the loader growing a bootstrap with its Hub tail).

Lines are gathered into 1 MiB chunks, handed to two threads with bounded queues of 8 chunks: one hashes
(`fwe-bootstrap-hasher`, chunk_hasher.py), one writes (`fwe-bootstrap-writer`, which also runs the checkpoints'
fsyncs).
sha256 and write() release the GIL, so both overlap the JSON parsing on the calling thread. Every 8 MiB
written, the writer asks the kernel to start writing those bytes to disk (posix_fadvise DONTNEED starts
writeback without waiting for it), so a checkpoint's or the part's fsync finds little left to wait for.
The chunk size, queue depth and writeback step were chosen with scripts/bench/bootstrap.py (figures in
runbooks/bootstrap.md, "Why these sizes").

Resume: `PartWriter(..., valid_bytes=V, valid_lines=L, resume=True)` trusts the first V bytes of the temporary file (they
were fsynced at a checkpoint), re-hashes them, then *replays*: each added line is compared with the bytes on
disk after V. While they match nothing is written; at the first difference or at the end of what is there (a
torn last line, say) the file is truncated at that point and writing continues. So records written after the
last checkpoint survive a crash when intact, and everything else is regenerated from the source.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from typing import Callable

from fwe_cli.errors import OutputError
from fwe_cli.output.chunk_hasher import QUEUE_CHUNKS, STALL_TIMEOUT_S, ChunkHasher
from fwe_cli.output.faults import NO_FAULTS, Faults
from fwe_cli.output.manifest_file import fsync_dir
from fwe_cli.output.os_errors import on_output
from fwe_cli.output.verify import hash_into

CHUNK_BYTES = 1 << 20
WRITEBACK_BYTES = 8 << 20
_START_WRITEBACK = hasattr(os, "posix_fadvise")


class PartWriter:
    """Appends lines to `partial_path`; `finish()` fsyncs and renames it to `final_path`."""

    def __init__(self, partial_path: str, final_path: str, valid_bytes: int = 0, valid_lines: int = 0,
                 resume: bool = False, faults: Faults = NO_FAULTS, background: bool = True):
        self.partial_path = partial_path
        self.final_path = final_path
        self.size = valid_bytes
        """Bytes of the part so far (on disk, queued, or confirmed by replay)."""
        self.lines = valid_lines
        self.replayed_lines = 0
        self.discarded_bytes = 0
        self._faults = faults
        self._hash = hashlib.sha256()
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._error: BaseException | None = None
        self._replay = None
        self._thread: threading.Thread | None = None
        self._hasher: ChunkHasher | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_CHUNKS)
        self._background = background
        with on_output("open" if resume else "create", partial_path):
            if resume:
                on_disk = os.path.getsize(partial_path)
                if on_disk < valid_bytes:
                    raise OutputError(f"{partial_path} has {on_disk} bytes but the last checkpoint saved "
                                      f"{valid_bytes}: the disk lost fsynced data; pass --force to start over")
                self._hash_prefix(valid_bytes)
                self._fd = os.open(partial_path, os.O_RDWR)
                if on_disk > valid_bytes:
                    self._replay = open(partial_path, "rb")
                    self._replay.seek(valid_bytes)
            else:
                self._fd = os.open(partial_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            if self._replay is None:
                self._start_writing()

    @property
    def replaying(self) -> bool:
        """Still confirming lines already on disk from before the crash."""
        return self._replay is not None

    def _hash_prefix(self, size: int) -> None:
        if hash_into(self._hash, self.partial_path, size) < size:
            raise OutputError(f"{self.partial_path} shrank while being resumed; pass --force to start over")

    # -- adding ---------------------------------------------------------------------------------------
    def add(self, line: bytes) -> None:
        """Append one line (bytes ending in a newline)."""
        if self._replay is not None:
            if self._replay.read(len(line)) == line:
                self._hash.update(line)
                self.size += len(line)
                self.lines += 1
                self.replayed_lines += 1
                return
            self._end_replay()
        self._pending.append(line)
        self._pending_size += len(line)
        self.size += len(line)
        self.lines += 1
        if self._pending_size >= CHUNK_BYTES:
            self._submit()

    def _end_replay(self) -> None:
        self._replay.close()
        self._replay = None
        with on_output("truncate", self.partial_path):
            self.discarded_bytes = os.fstat(self._fd).st_size - self.size
            os.ftruncate(self._fd, self.size)
            self._start_writing()

    def _start_writing(self) -> None:
        os.lseek(self._fd, self.size, os.SEEK_SET)
        self._written = self._flushing_from = self.size
        if self._background:
            self._hasher = ChunkHasher(self._hash, self.partial_path)
            self._thread = threading.Thread(target=self._run, name="fwe-bootstrap-writer", daemon=True)
            self._thread.start()

    def _submit(self) -> None:
        chunk = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        if self._thread is None:
            self._hash.update(chunk)
            self._write(chunk)
            return
        self._hasher.put(chunk)
        self._put(chunk)

    def _put(self, item) -> None:
        waited = 0.0
        while True:
            self._raise_error()
            try:
                self._queue.put(item, timeout=1.0)
                return
            except queue.Full:
                waited += 1.0
                if waited >= STALL_TIMEOUT_S:
                    raise OutputError(f"writing {self.partial_path} stalled for {STALL_TIMEOUT_S:.0f} s") from None

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _write(self, chunk: bytes) -> None:
        allowed = self._faults.allowed_write(len(chunk)) if self._faults.active else len(chunk)
        view = memoryview(chunk)[:allowed]
        with on_output("write", self.partial_path):
            while view:
                view = view[os.write(self._fd, view):]
            if self._faults.active:
                self._faults.wrote(allowed)
                if allowed < len(chunk):
                    raise self._faults.write_error()
        self._written += len(chunk)
        if _START_WRITEBACK and self._written - self._flushing_from >= WRITEBACK_BYTES:
            # Start writing these bytes to disk now (DONTNEED begins writeback without waiting for it, then
            # drops pages already clean), so the next fsync has little left to wait for.
            try:
                os.posix_fadvise(self._fd, self._flushing_from, self._written - self._flushing_from,
                                 os.POSIX_FADV_DONTNEED)
            except OSError:
                pass  # only a speed-up: the fsyncs still make the data durable
            self._flushing_from = self._written

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
            elif self._error is None:
                try:
                    if isinstance(item, bytes):
                        self._write(item)
                    else:  # a checkpoint: make what came before durable, then record it
                        self._fsync()
                        item()
                except BaseException as exc:  # handed to the adding thread, which raises it
                    self._error = exc

    # -- durability -------------------------------------------------------------------------------------
    def sync(self) -> None:
        """Everything added so far is written and fsynced (replay that has not diverged ends here)."""
        if self._replay is not None:
            self._end_replay()
        if self._pending:
            self._submit()
        if self._thread is not None:
            drained = threading.Event()
            self._put(drained)
            if not drained.wait(STALL_TIMEOUT_S):
                raise OutputError(f"writing {self.partial_path} stalled for {STALL_TIMEOUT_S:.0f} s")
            self._raise_error()
        self._fsync()

    def _fsync(self) -> None:
        with on_output("sync", self.partial_path):
            os.fsync(self._fd)

    def checkpoint(self, then: Callable[[], None]) -> None:
        """sync() and then `then()` (which records the resume point) -- on the writer thread when there is one,
        so parsing goes on during the fsync instead of the calling thread waiting for the disk."""
        if self._thread is None or self._replay is not None:
            self.sync()
            then()
            return
        if self._pending:
            self._submit()
        self._put(then)

    def finish(self, before_rename=lambda: None, after_rename=lambda: None) -> dict:
        """Sync, close and rename to the final name; returns {name, bytes, lines, sha256}."""
        self.sync()
        if self._hasher is not None:
            self._hasher.finish()
        self._sha256 = self._hash.hexdigest()
        self.close()
        before_rename()
        with on_output("rename", self.partial_path):
            os.replace(self.partial_path, self.final_path)
        fsync_dir(os.path.dirname(self.final_path))
        after_rename()
        return {"name": os.path.basename(self.final_path), "bytes": self.size, "lines": self.lines,
                "sha256": self._sha256}

    def close(self) -> None:
        """Stop the writer thread and close the file; never raises (used on error paths too)."""
        if self._thread is not None:
            try:
                self._queue.put(None, timeout=STALL_TIMEOUT_S)
            except queue.Full:
                pass
            self._thread.join(timeout=STALL_TIMEOUT_S)
            self._thread = None
        if self._hasher is not None:
            self._hasher.close()
            self._hasher = None
        if self._replay is not None:
            self._replay.close()
            self._replay = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def recover_renamed_part(partial_path: str, final_path: str) -> None:
    """A crash between a part's rename and the manifest update leaves the part under its final name while the
    manifest still calls it in progress: move it back, so resume replays it like any other temporary part."""
    if os.path.isfile(final_path) and not os.path.exists(partial_path):
        with on_output("rename", final_path):
            os.replace(final_path, partial_path)

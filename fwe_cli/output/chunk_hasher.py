"""Feeding a part's chunks to its sha256 on a thread of its own, beside the part writer's (fwe_cli/output/part_writer.py)."""

from __future__ import annotations

import queue
import threading

from fwe_cli.errors import OutputError

QUEUE_CHUNKS = 8
STALL_TIMEOUT_S = 300.0  # a write, fsync or hash that makes no progress this long is reported, not waited on forever


class ChunkHasher:
    """Feeds chunks to a hash object on its own thread (`fwe-bootstrap-hasher`), beside the writer thread.

    sha256 was the largest cost of the writer thread; hashing and writing
    one after the other there made it the bottleneck of a local bootstrap (see fwe_cli/output/part_writer.py)."""

    def __init__(self, digest, path: str):
        self._digest = digest
        self._path = path
        self._error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_CHUNKS)
        self._thread = threading.Thread(target=self._run, name="fwe-bootstrap-hasher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        update = self._digest.update
        while (chunk := self._queue.get()) is not None:
            if self._error is None:  # after an error, keep draining so that no put() waits
                try:
                    update(chunk)
                except BaseException as exc:  # raised in the adding thread by put() or finish()
                    self._error = exc

    def put(self, chunk: bytes | None) -> None:
        if self._error is not None:
            raise self._error
        try:
            self._queue.put(chunk, timeout=STALL_TIMEOUT_S)
        except queue.Full:
            raise OutputError(f"hashing {self._path} stalled for {STALL_TIMEOUT_S:.0f} s") from None

    def finish(self) -> None:
        """Return once every chunk given is hashed (the digest is then complete)."""
        self.put(None)
        self._thread.join(timeout=STALL_TIMEOUT_S)
        if self._thread.is_alive():
            raise OutputError(f"hashing {self._path} stalled for {STALL_TIMEOUT_S:.0f} s")
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Stop the thread (a no-op after finish()); never raises."""
        if self._thread.is_alive():
            try:
                self._queue.put(None, timeout=STALL_TIMEOUT_S)
            except queue.Full:
                pass
            self._thread.join(timeout=STALL_TIMEOUT_S)

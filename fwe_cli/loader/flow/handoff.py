"""One bounded queue between a producer thread and its consumer, where neither can hang the other: the producer's
`put` waits for room but gives up once the handoff is stopped, the producer's end or failure travels as its last item,
and `stop()` drains the queue (a blocked put wakes) and leaves END for a consumer that is waiting.

The loader's prefetch (prefetch.ThreadPrefetcher) and the native Hub reader's read-ahead (hub.readahead) hand
their items over through it.

    handoff = Handoff(depth=8)
    # producer thread:   for item in work: if not handoff.put(item): return
    #                    handoff.put(END)  (or handoff.put(Failure(exc)) from its `except`)
    # consumer:          item = handoff.get(timeout)   -> an item, END, or a Failure to raise
"""

from __future__ import annotations

import queue
import threading

POLL_S = 0.05  # how often a producer blocked on a full queue re-checks the stop event


class Failure:
    """The producer's exception, handed to the consumer (which raises it its own way)."""

    def __init__(self, exc: BaseException):
        self.exc = exc


END = object()
"""The producer's last item: it has finished, or the handoff was stopped."""


class Handoff:
    def __init__(self, depth: int):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()

    def put(self, item) -> bool:
        """Queue `item`, waiting for room; False (not queued) once `stop()` was called."""
        while not self.stopped.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def get(self, timeout: float | None = None):
        """The next item (END, a Failure, or a produced item); queue.Empty when nothing comes within `timeout`."""
        return self._queue.get(timeout=timeout)

    def qsize(self) -> int:
        return self._queue.qsize()

    def empty(self) -> bool:
        return self._queue.empty()

    def stop(self) -> None:
        """The producer stops at its next put; the queue is drained and END left for a consumer that waits."""
        self.stopped.set()
        self.drain()
        try:
            self._queue.put_nowait(END)
        except queue.Full:  # the producer refilled it meanwhile: the consumer is not waiting then
            pass

    def drain(self) -> None:
        """Drop what is queued (a producer blocked in `put` wakes and sees the stop)."""
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass

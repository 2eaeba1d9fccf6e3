"""A bounded background prefetch queue that never dies silently and never hangs its consumer.

Modelled on the shape of grain's ThreadPrefetchIterDataset: one named daemon thread fills a bounded queue
from an iterator; a stop event ends it; an exception in the producer is delivered to the consumer (and
re-raised there with the producer's traceback chained); `close()` sets the stop event, drains the queue so a
blocked `put` wakes up, and joins the thread.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")
_POLL_S = 0.05  # how often a blocked producer re-checks the stop event


class _End:
    pass


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


_END = _End()


class ProducerFailed(Exception):
    """Raised in the consumer; __cause__ is the producer's exception, traceback intact."""


class ThreadPrefetcher(Generic[T]):
    def __init__(self, make_iterator: Callable[[], Iterator[T]], depth: int, name: str = "fwe-prefetch"):
        self._make_iterator = make_iterator
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        iterator = None
        try:
            iterator = self._make_iterator()
            for item in iterator:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as exc:  # noqa: BLE001 - everything must reach the consumer
            self._put(_Failure(exc))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing a generator must not mask the real outcome
                    pass

    def qsize(self) -> int:
        return self._queue.qsize()

    def get(self, timeout: float) -> T:
        """Next item. Raises StopIteration at the end, ProducerFailed on a producer error,
        TimeoutError if nothing arrives within `timeout` seconds."""
        if self._finished:
            raise StopIteration
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no item within {timeout:g} s") from None
        if item is _END:
            self._finished = True
            raise StopIteration
        if isinstance(item, _Failure):
            self._finished = True
            raise ProducerFailed(f"{type(item.exc).__name__}: {item.exc}") from item.exc
        return item

    def wait_filled(self, n: int, timeout: float) -> int:
        """Wait until `n` items are queued, the producer ended, or `timeout` passed; return items queued."""
        deadline = time.monotonic() + timeout
        while self._queue.qsize() < n and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.002)
        return self._queue.qsize()

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the producer, drain the queue, join the thread. True when the thread has ended."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        while self.thread.is_alive() and time.monotonic() < deadline:
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self.thread.join(timeout=_POLL_S)
        self._finished = True
        return not self.thread.is_alive()

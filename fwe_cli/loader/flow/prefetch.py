"""A bounded background prefetch queue that never dies silently and never hangs its consumer.

Modelled on the shape of grain's ThreadPrefetchIterDataset: one named daemon thread fills a bounded queue
(flow.handoff) from an iterator; a stop event ends it; an exception in the producer is delivered to the consumer
(and re-raised there with the producer's traceback chained); `close()` stops the handoff, drains it so a blocked
`put` wakes up, and joins the thread.

With a `clock` (flow.stages.StageClock), the time each put takes, waiting for room included, is the producer's
`queue_put` stage, and `produced` records when each of the first KEEP_PRODUCED items was handed over and how long
its put waited: the producer's timeline that `fwe measure` computes a warmup from (measure.warmup).
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from typing import Callable, Generic, Iterator, TypeVar

from fwe_cli.loader.flow.handoff import END, Failure, Handoff
from fwe_cli.loader.flow.stages import StageClock

T = TypeVar("T")
KEEP_PRODUCED = 4096  # the start of a run is what a warmup is about: later items are not recorded (memory stays flat)


class ProducerFailed(Exception):
    """Raised in the consumer; __cause__ is the producer's exception, traceback intact."""


class ThreadPrefetcher(Generic[T]):
    def __init__(self, make_iterator: Callable[[], Iterator[T]], depth: int, name: str = "fwe-prefetch",
                 clock: StageClock | None = None):
        self._make_iterator = make_iterator
        self._handoff = Handoff(depth)
        self._finished = False
        self._clock = clock
        self.produced: list[tuple[float, float]] = []
        """(time.perf_counter() when it was queued, seconds its put waited) of each of the first KEEP_PRODUCED items."""
        # in its creator's context: the loader's Hub calls on it keep the loader's retry scope (transient.RetryScope)
        self.thread = threading.Thread(target=contextvars.copy_context().run, args=(self._run,), name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        iterator = None
        try:
            iterator = self._make_iterator()
            for item in iterator:
                if self._clock is not None:
                    self._clock.enter("queue_put")
                asked = time.perf_counter()
                if not self._handoff.put(item):
                    return
                if len(self.produced) < KEEP_PRODUCED:
                    queued = time.perf_counter()
                    self.produced.append((queued, queued - asked))
            self._handoff.put(END)
        except BaseException as exc:  # noqa: BLE001 - everything must reach the consumer
            self._handoff.put(Failure(exc))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing a generator must not mask the real outcome
                    pass

    def qsize(self) -> int:
        return self._handoff.qsize()

    def get(self, timeout: float) -> T:
        """Next item. Raises StopIteration at the end, ProducerFailed on a producer error,
        TimeoutError if nothing arrives within `timeout` seconds."""
        if self._finished:
            raise StopIteration
        try:
            item = self._handoff.get(timeout)
        except queue.Empty:
            raise TimeoutError(f"no item within {timeout:g} s") from None
        if item is END:
            self._finished = True
            raise StopIteration
        if isinstance(item, Failure):
            self._finished = True
            raise ProducerFailed(f"{type(item.exc).__name__}: {item.exc}") from item.exc
        return item

    def wait_filled(self, n: int, timeout: float) -> int:
        """Wait until `n` items are queued, the producer ended, or `timeout` passed; return items queued."""
        deadline = time.monotonic() + timeout
        while self.qsize() < n and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.002)
        return self.qsize()

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the producer, drain the queue, join the thread. True when the thread has ended."""
        self._handoff.stop()
        deadline = time.monotonic() + timeout
        while self.thread.is_alive() and time.monotonic() < deadline:
            self._handoff.drain()
            self.thread.join(timeout=0.05)
        self._finished = True
        return not self.thread.is_alive()

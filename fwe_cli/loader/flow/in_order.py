"""Work on a thread pool, results taken strictly in submission order: what makes the loader's batches (pipeline) and
fwe tokenize's shards (tokens.encode) independent of thread count and timing.

Both tokenizer backends release the GIL while they encode, so threads scale with cores; nothing here forks (a fork
after a tokenizer has started its Rust thread pool can deadlock the child).

    pool = ThreadPoolExecutor(threads, thread_name_prefix="fwe-tokenize")
    for result, tag in in_order(pool, threads, encode, ((docs, first) for docs, first in batches)):
        ...
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

A = TypeVar("A")
R = TypeVar("R")
Tag = TypeVar("Tag")


def in_order(pool: ThreadPoolExecutor, threads: int, fn: Callable[[A], R], items: Iterable[tuple[A, Tag]],
             closing: Callable[[], bool] = lambda: False,
             waiting: Callable[[bool], None] = lambda waiting: None) -> Iterator[tuple[R, Tag]]:
    """(fn(arg), tag) for each (arg, tag) of `items`, in order, with up to 2 x `threads` calls in flight on `pool`.

    `waiting(True)` is called before the caller is made to wait on a result, `waiting(False)` before the next item
    is pulled. Once `closing()` holds, calls not yet started are cancelled and the pool is shut down without waiting
    for the running ones (their results are dropped); otherwise it is shut down once every result is taken. When
    `items` itself fails, the results of the items before are yielded first, then its exception is raised."""
    pending: deque[tuple[Future, Tag]] = deque()
    source = iter(items)
    failure: Exception | None = None
    try:
        while True:
            try:
                arg, tag = next(source)
            except StopIteration:
                break
            except Exception as exc:  # the items' own failure: the results of the items before it come first
                failure = exc
                break
            pending.append((pool.submit(fn, arg), tag))
            while len(pending) >= 2 * threads or (pending and pending[0][0].done()):
                waiting(True)
                future, first = pending.popleft()
                yield future.result(), first
            waiting(False)
        while pending and not closing():
            waiting(True)
            future, first = pending.popleft()
            yield future.result(), first
        if failure is not None:
            raise failure
    finally:
        pool.shutdown(wait=not closing(), cancel_futures=True)

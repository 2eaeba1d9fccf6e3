"""One byte range of a Hub file brought to disk for `fwe bootstrap`: a GET with `Range: bytes=A-B` on a kept-alive
connection, from the file's CDN URL as the node resolved it (fwe_cli/loader/remote/hub_get.py: one resolve per file
for all the connections), written where it belongs a block at a time as it arrives, asked again from the bytes
received when the connection is cut (fwe_cli/bootstrap/hub_download.py queues the ranges and keeps track of what
landed).

    fetch_span(download, [start, end, landed], stop)    # returns once landed == end; SourceError, or Cancelled
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from fwe_cli.errors import OutputError, SourceError
from fwe_cli.loader.hub.ranges import REQUEST_TIMEOUT_S
from fwe_cli.loader.remote.transient import attempts_note, retry_wait, transient_reason

WRITE_BLOCK = 1 << 20  # received bytes are written (and seen by waiters) in blocks of this size


class Cancelled(Exception):
    """The fetcher was closed, or the file released, while a span was being fetched."""


def fetch_span(url: str, span: list[int], write: Callable[[int, bytes], None], stop: threading.Event) -> None:
    """Bring bytes span[0]..span[1] of `url` to disk: `write(offset, data)` stores what arrives and moves span[2]
    (the bytes landed) on, or raises Cancelled. One GET, again from the bytes landed when the connection is cut;
    transient failures are retried at once when bytes had come, else as the Hub retry policy says."""
    failures, since = 0, time.monotonic()
    while span[2] < span[1]:
        before = span[2]
        try:
            _get(url, span, write, stop)
        except (Cancelled, OutputError):  # stopped, or the download folder cannot be written: no retry helps
            raise
        except Exception as exc:  # httpx/huggingface_hub raise many types; the cause stays chained
            progressed = span[2] > before
            failures, since = (0, time.monotonic()) if progressed else (failures + 1, since)
            wait = 0.0 if progressed and transient_reason(exc) else retry_wait(exc, failures, since, f"reading {url}")
            if wait is None:
                raise SourceError(f"cannot download {url} (bytes {span[0]}-{span[1] - 1}){attempts_note(exc)}: "
                                  f"{' '.join(str(exc).split())}") from exc
            if wait and stop.wait(wait):
                raise Cancelled(url) from None
            continue
        if span[2] == before:
            raise SourceError(f"{url}: the server sent no bytes after byte {before} (asked for {span[0]}-"
                              f"{span[1] - 1})")


def _get(url: str, span: list[int], write: Callable[[int, bytes], None], stop: threading.Event) -> None:
    """One GET of what the span still lacks; writes what arrives, a block at a time."""
    from fwe_cli.loader.remote.hub_get import get

    at, end = span[2], span[1]
    with get(url, {"Range": f"bytes={at}-{end - 1}"}, timeout=REQUEST_TIMEOUT_S) as answer:
        skip = at if answer.status == 200 else 0  # a server that ignores Range sends the file from byte 0
        while skip:
            dropped = len(answer.read(min(skip, WRITE_BLOCK)))
            if not dropped:
                return
            skip -= dropped
        while at < end:
            if stop.is_set():
                raise Cancelled(url)
            block = answer.read(min(WRITE_BLOCK, end - at))
            if not block:
                return  # the body ended early: the caller asks again for the rest
            write(at, block)
            at += len(block)

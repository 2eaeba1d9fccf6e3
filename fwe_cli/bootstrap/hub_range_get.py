"""One byte range of a Hub file brought to disk for `fwe bootstrap`: a GET with `Range: bytes=A-B`, written where it
belongs as it arrives, asked again from the bytes received when the connection is cut (fwe_cli/bootstrap/hub_download.py
queues the ranges and keeps track of what landed).

    fetch_span(download, [start, end, landed], stop)    # returns once landed == end; SourceError, or Cancelled
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from fwe_cli.errors import OutputError, SourceError
from fwe_cli.loader.sources.hub_ranges import REQUEST_TIMEOUT_S
from fwe_cli.loader.transient import attempts_note, retry_wait, transient_reason

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
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    at, end = span[2], span[1]
    headers = build_hf_headers()
    headers["Range"] = f"bytes={at}-{end - 1}"
    with get_session().stream("GET", url, headers=headers, follow_redirects=True,
                              timeout=REQUEST_TIMEOUT_S) as response:
        if response.status_code >= 400:
            response.read()
            hf_raise_for_status(response)
        skip = at if response.status_code == 200 else 0  # a server that ignores Range sends the file from byte 0
        block: list[bytes] = []
        held = 0
        try:
            for chunk in response.iter_bytes():
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                chunk = chunk[:end - at - held]
                if chunk:
                    block.append(chunk)
                    held += len(chunk)
                if held >= WRITE_BLOCK or at + held >= end:
                    if stop.is_set():
                        raise Cancelled(url)
                    write(at, b"".join(block))
                    at, block, held = at + held, [], 0
                    if at >= end:
                        break
        finally:  # a cut connection keeps what came: the next request asks for the rest
            if block:
                try:
                    write(at, b"".join(block))
                except Cancelled:
                    pass

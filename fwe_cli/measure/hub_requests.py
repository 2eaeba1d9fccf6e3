"""Count the HTTP requests huggingface_hub sends (and `datasets` through it), for smoke and measure artifacts.

A cold Hub start is slow because of round trips; the count (and, in `fwe measure`, its split by phase) shows
how many. It hooks the client huggingface_hub builds for all its calls (`set_client_factory`), so it sees the
tokenizer download, dataset card, listings and parquet range reads alike. Installed once per process.
"""

from __future__ import annotations

import os
import threading
import time

_times: list[float] = []
_lock = threading.Lock()
_installed: bool | None = None


def uses_hub(source: str, tokenizer: str) -> bool:
    """Whether a run with this source and tokenizer talks to the Hub at all."""
    return source == "hub" or not (tokenizer == "byte" or os.path.exists(tokenizer))


def start_counting() -> bool:
    """Install the counting hook (idempotent). False when this huggingface_hub offers no way to hook it."""
    global _installed
    with _lock:
        if _installed is None:
            try:
                import huggingface_hub
                from huggingface_hub.utils import _http

                def factory():
                    client = _http.default_client_factory()
                    client.event_hooks["request"].append(lambda request: _times.append(time.perf_counter()))
                    return client

                huggingface_hub.set_client_factory(factory)
                _installed = True
            except Exception:  # noqa: BLE001 - an older/newer client without the hook: counts unknown
                _installed = False
        return _installed


def request_times() -> list[float]:
    """perf_counter time of every request counted so far in this process."""
    return list(_times)

"""Count the HTTP requests sent to the Hub (by huggingface_hub, `datasets` through it, and fwe's own HEAD), for smoke
and measure artifacts.

A cold Hub start is slow because of round trips; the count (and, in `fwe measure`, its split by phase) shows
how many. It hooks the client huggingface_hub builds for all its calls (`set_client_factory`), so it sees the
tokenizer download, dataset card, listings and parquet range reads alike; fwe's own requests count themselves. Both
add to one count, `hub_env.requests_sent()`, and to the counts by kind that every artifact holds as `hub_requests`
(`hub_env.hub_requests`): the Hub's resolver (limited per 5 minutes), its API, and CDN reads apart.

The hook is installed when huggingface_hub's HTTP module is first imported, not before: importing it (httpx) costs
a warm start more than its whole open, and a warm start may never need it before its first batch.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import TYPE_CHECKING

from fwe_cli.loader.remote.hub_env import hub_requests, note_request, requests_sent  # noqa: F401 - this module's API
from fwe_cli.loader.tokenization.names import hub_repo

if TYPE_CHECKING:
    from fwe_cli.loader.config import LoaderConfig

HTTP_MODULE = "huggingface_hub.utils._http"
_lock = threading.Lock()
_installed: bool | None = None


def uses_hub(config: LoaderConfig) -> bool:
    """Whether a run with this config talks to the Hub at all: its source does, or its tokenizer is a Hub id."""
    tokenizer = config.tokenizer
    return config.source.uses_hub() or (tokenizer is not None and hub_repo(tokenizer) is not None)


def _hook(http) -> None:
    import huggingface_hub

    def factory():
        client = http.default_client_factory()
        client.event_hooks["request"].append(lambda request: note_request(str(request.url)))
        return client

    huggingface_hub.set_client_factory(factory)


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds HTTP_MODULE through the other finders, then hooks it right after it has executed."""

    def find_spec(self, name, path=None, target=None):
        if name != HTTP_MODULE:
            return None
        sys.meta_path.remove(self)
        from importlib.util import find_spec

        spec = find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:
        self._inner.exec_module(module)
        _hook(module)


def start_counting() -> bool:
    """Count from now on (idempotent): at once if huggingface_hub's HTTP module is loaded, else when it loads.
    False when this huggingface_hub offers no way to hook it (its requests then go uncounted)."""
    global _installed
    with _lock:
        if _installed is None:
            try:
                import huggingface_hub

                # (the lazy export table: getattr would import the HTTP module this waits for)
                _installed = "set_client_factory" in getattr(huggingface_hub, "__all__", ())
                if _installed and HTTP_MODULE in sys.modules:
                    _hook(sys.modules[HTTP_MODULE])
                elif _installed:
                    sys.meta_path.insert(0, _AfterImport())
            except Exception:  # noqa: BLE001 - an older/newer client without the hook: counts unknown
                _installed = False
        return _installed

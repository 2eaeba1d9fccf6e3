"""Fetch one file of a Hub model repo (a tokenizer.json) through the Hugging Face cache, failing fast when the Hub
cannot be reached, so that a caller with an offline stand-in (GPT-2's packaged vocabulary) can use it at once.

`fetch_hub_file(repo, filename)` returns the cached path or raises `HubUnreachable` (offline mode without a cached
copy, a refused connection, a DNS failure, no answer within `HEAD_TIMEOUT_S`); any other error (404, 401, a Hub
that keeps answering 503) propagates as huggingface_hub raised it, after `call_with_retries`.

Why it is not just `hf_hub_download`: when the file is not cached and the HEAD request fails with a transport
error, huggingface_hub 2.4 re-sends it with `retry_on_errors=True` (http_backoff: 5 retries, waits 1-8 s, a 60 s
timeout each, `_ETAG_RETRY_TIMEOUT`): a refused connection then takes ~23 s and a Hub that never answers
minutes, with a log line per retry, and `call_with_retries` multiplied that by 3. Neither the count nor that
timeout is a parameter, so for the duration of the call `_single_head_attempt` empties the exception tuple
that decides that inner retry (5xx answers are still retried by huggingface_hub; transport errors are retried
by `call_with_retries`, which gives up at once on an unreachable Hub). No extra request is sent: cold it is
still HEAD + GET, warm one HEAD. Cached copies win: HF_HUB_OFFLINE=1 finds them with `local_files_only`, and
an unreachable Hub falls back to them inside huggingface_hub.

HF_ENDPOINT, HF_HOME, HF_HUB_CACHE and HF_HUB_OFFLINE are read when called (huggingface_hub reads them once, at
import), so one process can be pointed elsewhere; HF_HUB_ETAG_TIMEOUT, when set, still overrides the timeout.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from fwe_cli.loader.hub_env import cached_file, endpoint, hub_cache_dir, offline
from fwe_cli.loader.transient import call_with_retries, unreachable_reason

HEAD_TIMEOUT_S = 5.0
"""Connect and read timeout of the HEAD that opens a fetch (huggingface_hub's default is 10 s): a tokenizer.json
HEAD is answered in well under a second by a working Hub, and a dead one should cost little before the fallback."""

_PATCH_LOCK = threading.Lock()


class HubUnreachable(Exception):
    """The Hub could not be reached (or offline mode is on) and no cached copy exists; `reason` says which."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@contextmanager
def _single_head_attempt():
    """While held, a failed HEAD on an uncached file is not re-sent by huggingface_hub for transport errors."""
    try:
        from huggingface_hub import file_download
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency of datasets
        yield
        return
    with _PATCH_LOCK:
        original = getattr(file_download, "_DEFAULT_RETRY_ON_EXCEPTIONS", None)
        if not isinstance(original, tuple):  # another huggingface_hub layout: leave it alone
            yield
            return
        file_download._DEFAULT_RETRY_ON_EXCEPTIONS = ()
        try:
            yield
        finally:
            file_download._DEFAULT_RETRY_ON_EXCEPTIONS = original


def fetch_hub_file(repo: str, filename: str, head_timeout_s: float | None = None, revalidate: bool = False) -> str:
    """Local path of `filename` in model repo `repo`, from the HF cache or downloaded into it; HubUnreachable when
    offline (or unreachable) with no cached copy. `head_timeout_s` defaults to HEAD_TIMEOUT_S.

    A copy cached by an earlier run is used without a request (a warm start's one request goes to the dataset's
    listing); `revalidate` asks the Hub first whether main still has that file (one HEAD), as `hf_hub_download` does."""
    if not revalidate:
        cached = cached_file(repo, filename)  # read without importing huggingface_hub's download module
        if cached is not None:
            return cached
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    where = {"repo_id": repo, "filename": filename, "cache_dir": hub_cache_dir(), "endpoint": endpoint()}
    if offline():
        try:
            return hf_hub_download(**where, local_files_only=True)
        except LocalEntryNotFoundError:
            raise HubUnreachable(f"HF_HUB_OFFLINE=1 and no cached copy of {repo}/{filename}") from None

    def download() -> str:
        with _single_head_attempt():
            return hf_hub_download(**where, etag_timeout=head_timeout_s or HEAD_TIMEOUT_S)

    try:
        return call_with_retries(download, f"fetching {filename} of {repo}", fail_fast=True)
    except Exception as exc:
        reason = unreachable_reason(exc)
        if reason is None:
            raise
        raise HubUnreachable(f"the Hub at {where['endpoint']} cannot be reached ({reason})") from exc

"""Fetch one file of a Hub model repo (a tokenizer.json) into the Hugging Face cache, failing fast when the Hub
cannot be reached, so that a caller with an offline stand-in (GPT-2's packaged vocabulary) can use it at once.

`fetch_hub_file(repo, filename)` returns the cached path or raises `HubUnreachable` (offline without a cached copy, a
refused connection, a DNS failure, no answer within `HEAD_TIMEOUT_S`); other errors (404, 401, 503 past the
retries) propagate. It is one GET through fwe's client and retry policy, not `hf_hub_download`, whose retries of a
failing HEAD cannot be bounded; `revalidate` adds one HEAD and downloads only a changed file. The file lands where
huggingface_hub puts it (`blobs/<etag>`, the sha256 checked; `snapshots/<commit>/<file>` linking to it;
`refs/main`), so its tools find it. A node's ranks take turns under one lock (node_lock): one downloads, the others
find the file. HF_ENDPOINT, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE and HF_HUB_ETAG_TIMEOUT are read when called.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading

from fwe_cli.artifacts import write_atomic
from fwe_cli.loader.flow.in_background import InBackground
from fwe_cli.loader.remote.http import head, request
from fwe_cli.loader.remote.hub_env import cached_file, endpoint, fwe_cache_dir, hub_cache_dir, offline, resolve_url
from fwe_cli.loader.remote.node_lock import node_lock
from fwe_cli.loader.remote.transient import (
    RetryScope,
    call_with_retries,
    current_scope,
    hub_budget_s,
    scoped,
    unreachable_reason,
    work_scope,
)

HEAD_TIMEOUT_S = 5.0
"""Connect and read timeout of the request that opens a fetch (huggingface_hub's default is 10 s): a tokenizer.json
is answered in well under a second by a working Hub, and a dead one should cost little before the fallback."""
LOCK_WAIT_S = 60.0  # waiting for another rank's download, outside a loader (whose --timeout bounds it otherwise)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# (Hub endpoint, hub cache, repo, filename) -> a download start_fetch began, not waited for, and the retry scope it
# runs in: a fetch waits only for a download from the Hub and into the cache its own environment names
_started: dict[tuple[str, str, str, str], tuple[InBackground, RetryScope]] = {}
_started_lock = threading.Lock()


class HubUnreachable(Exception):
    """The Hub could not be reached (or offline mode is on) and no cached copy exists; `reason` says which."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def fetch_hub_file(repo: str, filename: str, head_timeout_s: float | None = None, revalidate: bool = False) -> str:
    """Local path of `filename` in model repo `repo` (at main), from the HF cache or downloaded into it;
    HubUnreachable when offline (or unreachable) with no cached copy. `head_timeout_s` defaults to HEAD_TIMEOUT_S.

    A copy cached by an earlier run is used without a request (a warm start's one request goes to the dataset's
    listing); `revalidate` asks the Hub first whether main still has that file (one HEAD), as `hf_hub_download` does,
    and falls back to the cached copy when the Hub cannot be reached. A download `start_fetch` began in this process
    is waited for instead of making another, and its retries become the caller's loader's (transient.RetryScope)."""
    cached = cached_file(repo, filename)
    if cached is not None and not revalidate:
        return cached
    if offline():
        if cached is not None:
            return cached
        raise HubUnreachable(f"HF_HUB_OFFLINE=1 and no cached copy of {repo}/{filename}")
    with _started_lock:
        started, retries = (None, None) if revalidate else _started.pop(_started_key(repo, filename), (None, None))
    if started is not None:
        retries.hand_to(current_scope())  # type: ignore[union-attr]
    try:
        return started.result() if started is not None else _download_once(repo, filename, head_timeout_s, revalidate)
    except Exception as exc:
        reason = unreachable_reason(exc)
        if reason is None:
            raise
        if cached is not None:
            return cached
        raise HubUnreachable(f"the Hub at {endpoint()} cannot be reached ({reason})") from exc


def start_fetch(repo: str, filename: str) -> bool:
    """Begin downloading `filename` of `repo` now, on a `fwe-hub-file` thread, when it is not cached and the Hub may be
    asked (not offline): the next fetch_hub_file of it in this process (without revalidate) waits for this download,
    and meets its error, instead of making its own. For a process that knows early which file it will need (the `fwe`
    process, before it has imported what the run needs). Whether a download began."""
    if cached_file(repo, filename) is not None or offline():
        return False
    key = _started_key(repo, filename)
    with _started_lock:
        if key in _started:
            return False
        # its error is met by fetch_hub_file, in the thread that needs the file; its retries go to that thread's
        # loader from then on (the caller's scope when there is one, else one of its own for that loader to adopt)
        retries = work_scope()
        with scoped(retries):
            download = InBackground(lambda: _download_once(repo, filename, None, False), "fwe-hub-file")
        _started[key] = download, retries
    return True


def _started_key(repo: str, filename: str) -> tuple[str, str, str, str]:
    return endpoint(), hub_cache_dir(), repo, filename


def _download_once(repo: str, filename: str, head_timeout_s: float | None, revalidate: bool) -> str:
    """The file downloaded into the cache under the node's lock for it (or found there once another rank's download
    ends), with fwe's retries; a caller maps the Hub being unreachable."""
    timeout = float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or head_timeout_s or HEAD_TIMEOUT_S)
    lock = os.path.join(fwe_cache_dir(), "locks", _folder_name(repo), filename.replace("/", "%2F") + ".lock")
    with node_lock(lock, hub_budget_s() or LOCK_WAIT_S, f"another rank's download of {repo}/{filename}"):
        if not revalidate and (found := cached_file(repo, filename)) is not None:
            return found  # another rank fetched it while this one waited
        return call_with_retries(lambda: _download(repo, filename, timeout, revalidate),
                                 f"fetching {filename} of {repo}", fail_fast=True)


def _folder_name(repo: str) -> str:
    return "models--" + repo.replace("/", "--")


def _download(repo: str, filename: str, timeout: float, revalidate: bool) -> str:
    """One attempt: (a HEAD when revalidating, then) the GET, stored in the cache; the snapshot path."""
    url = resolve_url(repo, "main", filename, repo_type="model")
    if revalidate:
        commit, etag = _identity(head(url, timeout), url)
        if os.path.isfile(_blob(repo, etag)):
            return _store(repo, filename, commit, etag, None)
    with request("GET", url, timeout=timeout) as answer:
        headers, body = answer.headers, answer.read()
    commit, etag = _identity(headers, url)
    if _SHA256.match(etag) and hashlib.sha256(body).hexdigest() != etag:
        raise ValueError(f"{url}: the body's sha256 differs from the Hub's ({etag}): the download is damaged")
    return _store(repo, filename, commit, etag, body)


def _identity(headers: dict[str, str], url: str) -> tuple[str, str]:
    """(commit, normalized etag) of the Hub's answer: X-Repo-Commit, and X-Linked-Etag (an LFS file's sha256) or ETag
    without W/ and quotes, as huggingface_hub names blobs."""
    commit = headers.get("x-repo-commit")
    etag = headers.get("x-linked-etag") or headers.get("etag") or ""
    etag = (etag[2:] if etag.startswith("W/") else etag).strip('"')
    if not commit or not etag or "/" in etag:
        raise ValueError(f"{url}: the Hub's answer lacks X-Repo-Commit or ETag, which the cache needs")
    return commit, etag


def _blob(repo: str, etag: str) -> str:
    return os.path.join(hub_cache_dir(), _folder_name(repo), "blobs", etag)


def _store(repo: str, filename: str, commit: str, etag: str, body: bytes | None) -> str:
    """The file at snapshots/<commit>/<filename>, a relative link to blobs/<etag> (written from `body` when given; a
    copy where links cannot be made), and refs/main = commit; the snapshot path."""
    folder = os.path.join(hub_cache_dir(), _folder_name(repo))
    blob = _blob(repo, etag)
    if body is not None:
        write_atomic(blob, body)
    snapshot = os.path.join(folder, "snapshots", commit, filename)
    os.makedirs(os.path.dirname(snapshot), exist_ok=True)
    link = f"{snapshot}.link{os.getpid()}"
    try:
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.relpath(blob, os.path.dirname(snapshot)), link)
        os.replace(link, snapshot)
    except OSError:  # no symlinks here: a copy, as huggingface_hub makes
        with open(blob, "rb") as handle:
            write_atomic(snapshot, handle.read())
    write_atomic(os.path.join(folder, "refs", "main"), commit.encode())
    return snapshot

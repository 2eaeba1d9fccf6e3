"""Where the Hugging Face Hub is and how this process may use it, as the environment says when asked.

huggingface_hub reads HF_ENDPOINT, HF_HOME, HF_HUB_CACHE and HF_HUB_OFFLINE once, at import; these functions read
them when called, so one process can be pointed at another server or cache (tests do, in-process). The native Hub
reader and the tokenizer fetch both use them.

A warm start's path to its first batch avoids importing huggingface_hub's HTTP stack (httpx, its SSL context, the
file_download module): that import costs more CPU than the whole rest of a warm open, and on a warm start it would
serve one HEAD request. So this module also has the few pieces of the Hub's conventions that path needs, read the
way huggingface_hub reads them: the cache layout of a downloaded file (`cached_file`) and the token (`token`). fwe's
own requests go through http.py; every Hub request is counted here (`note_request`, `requests_sent`).
"""

from __future__ import annotations

import os
import threading


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


# Each function imports huggingface_hub's constants only when the environment does not say: that import reads the
# variables once, for good, and a process whose variables change later (tests do) must not have it read them early.
def endpoint() -> str:
    """The Hub's base URL, without a trailing slash."""
    if os.environ.get("HF_ENDPOINT"):
        return os.environ["HF_ENDPOINT"].rstrip("/")
    from huggingface_hub import constants

    return constants.ENDPOINT.rstrip("/")


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as the environment says now, or as huggingface_hub read it."""
    if "HF_HUB_OFFLINE" in os.environ:
        return _truthy(os.environ["HF_HUB_OFFLINE"]) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE"))
    if _truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        return True
    from huggingface_hub import constants

    return constants.HF_HUB_OFFLINE


def resolve_url(repo: str, revision: str, path: str, repo_type: str = "dataset") -> str:
    """The URL of file `path` of repo `repo` (a dataset, or a model) at `revision` (a branch, tag or commit sha;
    quoted whole)."""
    from urllib.parse import quote

    kind = "" if repo_type == "model" else f"{repo_type}s/"
    return f"{endpoint()}/{kind}{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"


def hub_cache_dir() -> str:
    """The hub cache huggingface_hub would use if it read HF_HUB_CACHE / HF_HOME now."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def fwe_cache_dir() -> str:
    """fwe's own Hub caches (listings, head cache): inside the hub cache, so clearing that cache clears them."""
    return os.path.join(hub_cache_dir(), "fwe")


# -- the request count: numbers, not a record per request, so a long run's accounting stays the same size ---------
# Requests by kind: the Hub's resolver (`/resolve/`, the file downloads the Hub limits per 5 minutes), the API
# (listing), and the CDN (a download URL the resolver redirected to, on whichever host). Events beside them:
# `re_resolves` (a download URL resolved again: expired, or refused), `failed_resolves` (a resolve whose answer did
# not come back as one: an error status, a lost connection, a timeout; its retry asks the resolver again) and
# `range_fallbacks` (reads sent to the Hub's URL because the CDN ignored Range).
KINDS = ("resolver", "api", "cdn")
EVENTS = ("re_resolves", "failed_resolves", "range_fallbacks")
_sent = 0
_counts = dict.fromkeys(KINDS + EVENTS, 0)
MARKS = 256
_marks: list[tuple[int, dict[str, int]] | None] = [None] * MARKS  # the last readings of requests_sent(), with the
_next_mark = 0  # counts then (see hub_requests); a ring of fixed size
_sent_lock = threading.Lock()


def request_kind(url: str) -> str:
    """'resolver', 'api' or 'cdn': what a request to `url` is to the Hub's quotas (another host than the endpoint's,
    or a path of its own that is neither, is a download URL)."""
    from urllib.parse import urlsplit

    parts, hub = urlsplit(url), urlsplit(endpoint())
    if (parts.scheme, parts.netloc) != (hub.scheme, hub.netloc):
        return "cdn"
    path = parts.path[len(hub.path.rstrip("/")):]
    return "api" if path.startswith("/api/") else "resolver" if "/resolve/" in path else "cdn"


def note_request(url: str | None = None) -> None:
    """Count one HTTP request to the Hub (or the CDN it sends files to), being sent now to `url` (None: not told)."""
    global _sent
    kind = request_kind(url) if url else None
    with _sent_lock:
        _sent += 1
        if kind is not None:
            _counts[kind] += 1


def note_event(name: str) -> None:
    """Count one of EVENTS."""
    with _sent_lock:
        _counts[name] += 1


def requests_sent() -> int:
    """How many Hub requests this process has counted so far (fwe's own, and huggingface_hub's once
    `fwe_cli.measure.hub_requests` counts them). A run's share is the difference of two readings; each reading is
    also a mark that `hub_requests(since=reading)` counts from."""
    global _next_mark
    with _sent_lock:
        if _marks[_next_mark - 1] is None or _marks[_next_mark - 1][0] != _sent:
            _marks[_next_mark] = (_sent, dict(_counts))
            _next_mark = (_next_mark + 1) % MARKS
        return _sent


def hub_requests(since: int | None = None) -> dict[str, int]:
    """The requests by kind (KINDS) and EVENTS counted so far, or since the reading `since` of requests_sent() (the
    counts cannot have changed while the total did not; a reading too old to be kept counts from 0)."""
    with _sent_lock:
        before = next((mark[1] for mark in _marks if mark is not None and mark[0] == since), {})
        return {name: count - before.get(name, 0) for name, count in _counts.items()}


# -- the cache and the token, without huggingface_hub's HTTP stack -----------------------------------------------
def cached_file(repo: str, filename: str, repo_type: str = "model", revision: str = "main") -> str | None:
    """Path of `filename` as an earlier download left it in the hub cache (`<type>s--<org>--<name>/refs/<revision>`
    names a snapshot folder), or None; what huggingface_hub's try_to_load_from_cache finds."""
    folder = os.path.join(hub_cache_dir(), f"{repo_type}s--" + repo.replace("/", "--"))
    try:
        with open(os.path.join(folder, "refs", revision), encoding="ascii") as handle:
            commit = handle.read().strip()
    except OSError:
        commit = revision  # a commit sha names its snapshot directly
    path = os.path.join(folder, "snapshots", commit, filename)
    return path if commit and os.path.isfile(path) else None


def token() -> str | None:
    """The Hub token huggingface_hub would send: HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), else the file
    `hf auth login` wrote (HF_TOKEN_PATH, default $HF_HOME/token); None with HF_HUB_DISABLE_IMPLICIT_TOKEN."""
    if _truthy(os.environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN")):
        return None
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if (os.environ.get(name) or "").strip():
            return os.environ[name].strip()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    try:
        with open(os.environ.get("HF_TOKEN_PATH") or os.path.join(home, "token"), encoding="utf-8") as handle:
            return handle.read().strip() or None
    except OSError:
        return None

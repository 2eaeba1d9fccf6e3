"""Where a Hub file's bytes are read from, resolved once per node: the download URL the Hub's `/resolve/` answers
with (a 302 to a signed CDN URL, for a file in LFS), its expiry and the file's Hub headers, kept in the node's cache
beside the listing, so every rank and DataLoader worker of the node reads footers and row groups from the CDN.

    entry = current(url)                           # this process's entry, else the node's, while fresh; else None
    entry, answer = resolve(url, headers, timeout, stale=None)  # one process of the node asks; the others wait

Why: the Hub limits requests to its resolver per 5 minutes (answering 429 beyond), and a resolve per range read is a
request per row group per reader. The resolve is the caller's own read sent to the Hub without following the
redirect to the CDN (a rename's redirect to another resolve URL is followed): a 302 gives the entry; an answer with
the bytes (a Hub that serves the file itself: a small file, a mirror) is handed back to the caller, and the entry
says the Hub answers it (reads then go to it, as one resolve each).

The entry is a JSON file per URL under `$HF_HUB_CACHE/fwe/resolved/`, written under an flock per URL (node_lock):
the process that finds no fresh entry asks while the others of the node wait on the lock and then read its entry.
An entry is fresh until REFRESH_MARGIN_S (at most a quarter of its lifetime) before its expiry (the URL's own
`Expires` / `X-Amz-Expires` / `X-Goog-Expires`, else UNKNOWN_TTL_S); one refused or expired is `stale` to
`resolve`, which asks again unless another process already has. A 429 to a resolve pauses the node's resolves for
its Retry-After (a file beside the locks): every process waits it out once before its next resolve. A signed URL
grants its file until it expires: it is kept where the Hub cache keeps the token and the files themselves.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import asdict, dataclass, replace
from urllib.parse import parse_qs, urlsplit

import orjson

from fwe_cli.artifacts import write_atomic
from fwe_cli.loader.remote.hub_env import endpoint, fwe_cache_dir
from fwe_cli.loader.remote.node_lock import node_lock
from fwe_cli.loader.remote.transient import hub_budget_s

FORMAT = 1
REFRESH_MARGIN_S = 60.0  # an entry is resolved again this long before its URL expires (at most a quarter of its life)
UNKNOWN_TTL_S = 600.0  # the lifetime of a URL that does not say when it expires (a 403 resolves it sooner)
LOCK_WAIT_S = 60.0  # waiting for another process's resolve, outside a loader (whose --timeout bounds it otherwise)
MAX_PAUSE_S = 60.0  # a Retry-After longer than this pauses the node this long


@dataclass(frozen=True)
class Resolved:
    """What the Hub answered to a resolve of `url`, when."""

    url: str
    """The Hub's resolve URL (its commit pinned by the caller)."""
    location: str | None
    """The download URL it redirects to (absolute); None: the Hub answers the URL itself."""
    resolved_at: float
    """Wall-clock time of the answer."""
    expires: float
    """Wall-clock time after which `location` is not to be used."""
    ranges: bool = True
    """False once the location's host answered a Range with the whole file: reads go to the Hub's URL."""
    etag: str | None = None
    size: int | None = None
    commit: str | None = None

    def fresh(self, now: float | None = None) -> bool:
        """Whether the entry may be used now (REFRESH_MARGIN_S, at most a quarter of its life, before it expires)."""
        margin = min(REFRESH_MARGIN_S, (self.expires - self.resolved_at) / 4)
        return (time.time() if now is None else now) < self.expires - margin

    @classmethod
    def of(cls, url: str, status: int, headers: dict[str, str], now: float) -> "Resolved":
        """The entry of an answer to a resolve: a redirect's location, or the Hub's own answer (status 2xx)."""
        location = headers.get("location") if 300 <= status < 400 else None
        size = headers.get("x-linked-size") or headers.get("content-range", "").rpartition("/")[2]
        return cls(url, location, now, now + (url_lifetime(location) if location else UNKNOWN_TTL_S),
                   etag=(headers.get("x-linked-etag") or headers.get("etag") or "").strip('"') or None,
                   size=int(size) if size and size.isdigit() else None, commit=headers.get("x-repo-commit"))


def url_lifetime(url: str, now: float | None = None) -> float:
    """Seconds `url` stays valid from now, as its signature's query says (CloudFront `Expires`, S3 `X-Amz-Date` +
    `X-Amz-Expires`, GCS `X-Goog-Date` + `X-Goog-Expires`), else UNKNOWN_TTL_S."""
    import calendar

    query = {k.lower(): v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    now = time.time() if now is None else now
    try:
        if "expires" in query:
            return float(query["expires"]) - now
        for vendor in ("amz", "goog"):
            if f"x-{vendor}-expires" in query:
                signed = calendar.timegm(time.strptime(query[f"x-{vendor}-date"], "%Y%m%dT%H%M%SZ"))
                return signed + float(query[f"x-{vendor}-expires"]) - now
    except (KeyError, ValueError):
        pass
    return UNKNOWN_TTL_S


# -- the entries: this process's, and the node's on disk ----------------------------------------------------------
_memory: dict[tuple[str, str], Resolved] = {}  # (the node cache's folder, URL) -> its entry, as this process has it
_memory_lock = threading.Lock()


def _path(url: str, suffix: str = ".json", folder: str = "resolved") -> str:
    return os.path.join(fwe_cache_dir(), folder, hashlib.sha256(url.encode()).hexdigest()[:32] + suffix)


def _read(url: str) -> Resolved | None:
    try:
        data = orjson.loads(open(_path(url), "rb").read())
        entry = Resolved(**{k: v for k, v in data.items() if k != "format"}) if data.get("format") == FORMAT else None
    except (OSError, orjson.JSONDecodeError, TypeError, AttributeError):
        return None
    return entry if entry is not None and entry.url == url else None


def _keep(entry: Resolved) -> Resolved:
    """This process's entry now, and the node's (a cache that cannot be written only costs the others a resolve)."""
    with _memory_lock:
        _memory[fwe_cache_dir(), entry.url] = entry
    try:
        write_atomic(_path(entry.url), orjson.dumps({"format": FORMAT, **asdict(entry)}))
    except OSError:
        pass
    return entry


def current(url: str) -> Resolved | None:
    """The fresh entry of `url`: this process's, else the node's; None when there is none."""
    with _memory_lock:
        entry = _memory.get((fwe_cache_dir(), url))
    if entry is not None and entry.fresh():
        return entry
    entry = _read(url)
    if entry is None or not entry.fresh():
        return None
    with _memory_lock:
        _memory[fwe_cache_dir(), url] = entry
    return entry


def without_ranges(entry: Resolved) -> Resolved:
    """Record that `entry`'s location ignores Range (the node's reads of the file go to the Hub's URL)."""
    with node_lock(_path(entry.url, ".lock", "locks/resolved"), hub_budget_s() or LOCK_WAIT_S, _what(entry.url)):
        return _keep(replace(entry, ranges=False))


# -- asking the Hub -------------------------------------------------------------------------------------------------
def _what(url: str) -> str:
    return f"another process's resolve of {urlsplit(url).path.rpartition('/')[2]}"


def _to_another_resolve(target: str) -> bool:
    """Whether a redirect to `target` is to be followed while resolving: another resolve URL of the Hub (a renamed
    repo), not a download URL."""
    hub, parts = urlsplit(endpoint()), urlsplit(target)
    return (parts.scheme, parts.netloc) == (hub.scheme, hub.netloc) and "/resolve/" in parts.path


def resolve(url: str, headers: dict[str, str], timeout: float, stale: Resolved | None = None):
    """(entry, answer): the node's entry of `url` as another process just made it (answer None), else the Hub's:
    asked with the caller's `headers` (its Range), as one process of the node at a time. A redirect gives the entry
    (answer None); the Hub's own answer with the bytes comes back open, for the caller to read. `stale`: an entry
    refused or expired, which is not taken again. Errors are http.request's (a 429 also pauses the node)."""
    from fwe_cli.loader.remote.http import ERROR_BODY_BYTES, HttpStatusError, request
    from fwe_cli.loader.remote.hub_env import note_event

    with node_lock(_path(url, ".lock", "locks/resolved"), hub_budget_s() or LOCK_WAIT_S, _what(url)):
        found = _read(url)
        if found is not None and found.fresh() and (stale is None or found.resolved_at > stale.resolved_at):
            with _memory_lock:
                _memory[fwe_cache_dir(), url] = found
            return found, None
        _wait_for_pause()
        if stale is not None or found is not None:  # expired, or refused
            note_event("re_resolves")
        try:
            answer = request("GET", url, headers, timeout=timeout, follow=_to_another_resolve)
        except Exception as exc:  # an error status, a lost connection, a timeout: the retry asks again
            note_event("failed_resolves")
            if isinstance(exc, HttpStatusError) and exc.response.status_code == 429:
                _pause(exc.response.headers)
            raise
        entry = _keep(Resolved.of(url, answer.status, answer.headers, time.time()))
        if entry.location is None:
            return entry, answer
        answer.read(ERROR_BODY_BYTES)
        answer.close()
        return entry, None


# -- a 429: the node's resolves pause once --------------------------------------------------------------------------
def _pause_path() -> str:
    return _path(endpoint(), ".pause", "locks/resolved")


def _pause(headers) -> None:
    """A 429's Retry-After (seconds) pauses the node's resolves until then (the later of two pauses holds)."""
    try:
        seconds = min(float(headers.get("Retry-After")), MAX_PAUSE_S)
    except (AttributeError, TypeError, ValueError):
        return
    until = time.time() + seconds
    if until > _paused_until():
        try:
            write_atomic(_pause_path(), f"{until:.3f}\n{os.getpid()}\n".encode())
        except OSError:
            pass


def _paused_until() -> float:
    try:
        return float(open(_pause_path(), encoding="ascii").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def _wait_for_pause() -> None:
    """Before a resolve: wait out a pause a 429 put on the node's resolves (at most MAX_PAUSE_S)."""
    left = min(_paused_until() - time.time(), MAX_PAUSE_S)
    if left > 0:
        time.sleep(left)  # the time the Hub asked for, once: every process of the node waits for the same moment

"""A GET of a Hub file's bytes (a range of them) from where the node resolved it (resolve_cache): its CDN URL,
resolved once per node and URL lifetime, or the Hub itself where the Hub serves the file.

    with get(resolve_url(repo, sha, path), {"Range": "bytes=0-99"}, timeout=30) as answer:
        answer.status, answer.read()          # 206, or 200: the whole file from byte 0 (a host ignoring Range)

The native reader's footers and row groups (hub.ranges), its early footer (hub.native) and bootstrap's range
downloads (bootstrap.hub_range_get) all read through it, so a node sends the Hub's resolver one request per file.

What can go wrong, and what is done:
- the CDN refuses the URL (401/403/410): expired (by this machine's clock) or not, it is resolved again by one
  process of the node, the others waiting for it; a URL refused while it was still fresh counts, and after
  MAX_REFUSALS of those in a row the read fails with one line naming the file and the status (a clock far off the
  CDN's, a revoked signature);
- the CDN ignores Range (a 200 with the whole file): this answer is the caller's (it reads up to the bytes it
  wants), and the node's later reads of the file go to the Hub's URL instead, where the Hub's own Range answer
  (redirects followed as any read's) is taken: counted as `range_fallbacks` (hub_env.hub_requests);
- the Hub answers 429: its Retry-After pauses the node's resolves (resolve_cache); the caller's retry policy
  (transient.py) retries the read as any other.
The Hub's token goes to the Hub's host only (http.py), never to the CDN's.
"""

from __future__ import annotations

import time
from urllib.parse import unquote, urlsplit

from fwe_cli.errors import SourceError
from fwe_cli.loader.remote.resolve_cache import Resolved, current, resolve, without_ranges

REFUSED = frozenset({401, 403, 410})
MAX_REFUSALS = 3  # fresh URLs refused in a row (each resolved anew) before the read fails


def file_name(url: str) -> str:
    """The file a Hub resolve URL names (its path in the repository)."""
    path = urlsplit(url).path
    return unquote(path.split("/resolve/", 1)[1].partition("/")[2]) if "/resolve/" in path else url


def _refusal(url: str, entry: Resolved, status: int, refusals: int) -> SourceError:
    host = urlsplit(entry.location or url).netloc
    return SourceError(f"Hub file {file_name(url)}: its download URL on {host} was refused with HTTP {status} "
                       f"{refusals} times, each freshly resolved (this machine's clock far off the Hub's, or a "
                       "revoked signature); check the clock (timedatectl), or read a local copy (fwe bootstrap)")


def get(url: str, headers: dict[str, str], timeout: float):
    """The answer (http.Answer, status 2xx, open) to a GET of Hub resolve URL `url` with `headers` (a Range), read
    from where the node resolved the file. HttpStatusError and the rest as http.request raises them; SourceError
    after MAX_REFUSALS refusals of fresh download URLs."""
    from fwe_cli.loader.remote.http import HttpStatusError, request
    from fwe_cli.loader.remote.hub_env import note_event

    stale: Resolved | None = None
    refusals = expired = 0
    while True:
        entry = current(url) if stale is None else None
        if entry is None:
            entry, answer = resolve(url, headers, timeout, stale)
            if answer is not None:  # the Hub served the bytes itself
                return answer
        if entry.location is None or not entry.ranges:  # the Hub's own answer (redirects followed: a read each)
            if not entry.ranges:
                note_event("range_fallbacks")
            return request("GET", url, headers, timeout=timeout)
        try:
            answer = request("GET", entry.location, headers, timeout=timeout)
        except HttpStatusError as exc:
            status = exc.response.status_code
            if status not in REFUSED:
                raise
            if time.time() < entry.expires:  # refused while fresh by this clock (an expired one is not: it was late)
                refusals += 1
            else:
                expired += 1
            if refusals >= MAX_REFUSALS or expired >= 2 * MAX_REFUSALS:
                raise _refusal(url, entry, status, refusals + expired) from exc
            stale = entry
            continue
        if answer.status == 200 and "Range" in headers:  # the CDN ignores Range: this read slices it, later ones
            without_ranges(entry)  # go to the Hub
        return answer

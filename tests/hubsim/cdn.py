"""The test Hub's CDN: the signed download URLs its resolver redirects to, and serving a file's bytes (ranges).

The Hub answers a resolve of a file with a 302 to a signed URL on its CDN, valid for a while, and the CDN checks the
signature and the expiry of every request and serves Range itself. Here any HubServer is that CDN for the URLs
`sign` makes (the `cdn` fixture is a second server, another host:port to a client; a Location without a host is the
resolving server's own):

    /cdn/{datasets|models}/{repo}/{sha}/{path}?Expires=<unix s>&Signature=<hex>&Key-Pair-Id=hubsim

as CloudFront signs the Hub's `cdn-lfs` URLs (Expires in whole seconds, rounded up). `check` gives the file such a
URL names, or the CDN's refusal: 403 AccessDenied when it has expired or its signature does not match (tampered).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from urllib.parse import parse_qs, quote, unquote, urlsplit

SIGNING_KEY = b"hubsim-cdn-key"  # every HubServer signs and checks with it (a Hub and its CDN in one test)
PREFIX = "/cdn/"


class Refused(Exception):
    """The CDN refuses the URL (403, with an S3-style reason)."""


def _signature(path: str, expires: int) -> str:
    return hmac.new(SIGNING_KEY, f"{path}\n{expires}".encode(), hashlib.sha256).hexdigest()[:40]


def sign(kind: str, repo_id: str, sha: str, path: str, ttl_s: float, now: float | None = None) -> str:
    """The CDN path (with its query) of file `path` of `kind`s/`repo_id` at commit `sha`, valid `ttl_s` from now."""
    where = f"{PREFIX}{kind}/{repo_id}/{sha}/{quote(path)}"
    expires = math.ceil((time.time() if now is None else now) + ttl_s)
    return f"{where}?Expires={expires}&Signature={_signature(where, expires)}&Key-Pair-Id=hubsim"


def check(url_path: str, now: float | None = None) -> tuple[str, str, str, str]:
    """(kind, repo_id, sha, path) of the file a signed CDN path names; Refused when it is expired or tampered."""
    split = urlsplit(url_path)
    query = parse_qs(split.query)
    parts = split.path[len(PREFIX):].split("/")
    try:
        expires = int(query["Expires"][0])
        signature = query["Signature"][0]
    except (KeyError, ValueError):
        raise Refused("AccessDenied: missing or malformed Expires/Signature") from None
    if len(parts) < 5 or not hmac.compare_digest(signature, _signature(split.path, expires)):
        raise Refused("AccessDenied: the signature does not match")
    if (time.time() if now is None else now) > expires:
        raise Refused("AccessDenied: Request has expired")
    return parts[0], f"{parts[1]}/{parts[2]}", parts[3], unquote("/".join(parts[4:]))


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """'bytes=a-b' | 'bytes=a-' | 'bytes=-n' -> (first, last) inclusive, clamped; None if unsatisfiable."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    try:
        if first == "":
            n = int(last)
            return (max(0, size - n), size - 1) if n > 0 and size else None
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        return None
    return (start, end) if start <= end and start < size else None


def file_chunks(disk, start: int, end: int, chunk: int):
    """Bytes start..end (inclusive) of the file at `disk`, `chunk` at a time."""
    with open(disk, "rb") as handle:
        handle.seek(start)
        left = end - start + 1
        while left > 0:
            data = handle.read(min(chunk, left))
            if not data:
                return
            left -= len(data)
            yield data

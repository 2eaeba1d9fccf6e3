"""The test Hub's signed CDN redirects (tests/hubsim/cdn.py), spoken to with http.client: a resolve of an LFS file
answered 302 to a signed, expiring URL with the Hub's headers; the CDN serving it with Range, refusing it expired or
tampered (403), or ignoring Range when told; the request log's `kind`."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.hubsim import cdn
from tests.hubsim.faults import Faults
from tests.hubsim.test_server import DS, SHARD0, request, sha_of


def _signed_location(hub, cdn_url: str, ttl_s: float = 60) -> tuple[str, dict]:
    hub.set_faults(redirect_match="resolve", redirect_to=cdn_url, sign_ttl_s=ttl_s)
    status, headers, body = request(hub.url, "GET", f"{DS}/resolve/main/{SHARD0}", {"Range": "bytes=0-9"})
    assert status == 302 and body == b""
    return headers["Location"], headers


def test_a_resolve_is_answered_302_to_a_signed_cdn_url_with_the_hubs_headers(hub, cdn_server, hubsim_root):
    """An LFS file's resolve: 302 with X-Repo-Commit, X-Linked-Etag and X-Linked-Size to the CDN's signed URL, which
    serves the Range (206) itself; a file not in LFS (the card) is served by the Hub itself; the logs say which
    request was a resolve and which a CDN read."""
    data = (hubsim_root / "datasets" / "HuggingFaceFW" / "fineweb-edu" / SHARD0).read_bytes()
    location, headers = _signed_location(hub, cdn_server.url)
    assert location.startswith(f"{cdn_server.url}/cdn/datasets/")
    assert "Expires=" in location and "Signature=" in location
    assert headers["X-Repo-Commit"] == sha_of(hub) and headers["X-Linked-Size"] == str(len(data))
    parts = urlsplit(location)
    status, got, body = request(cdn_server.url, "GET", f"{parts.path}?{parts.query}", {"Range": "bytes=100-199"})
    assert status == 206 and body == data[100:200] and got["Content-Range"] == f"bytes 100-199/{len(data)}"
    assert request(hub.url, "GET", f"{DS}/resolve/main/README.md")[0] == 200
    assert [r["kind"] for r in hub.requests()] == ["resolve", "api", "resolve"]
    assert [(r["kind"], r["status"]) for r in cdn_server.flush()] == [("cdn", 206)]


def test_the_cdn_refuses_an_expired_or_tampered_url_and_may_ignore_range(hub, cdn_server):
    """403 for a URL past its Expires (signed in the past) and for one whose path was changed; with refuse_ranges a
    Range is answered with the whole file (200)."""
    sha = sha_of(hub)
    expired = cdn.sign("datasets", "HuggingFaceFW/fineweb-edu", sha, SHARD0, ttl_s=1, now=1_000_000.0)
    status, _, body = request(cdn_server.url, "GET", expired)
    assert status == 403 and b"expired" in body
    fresh = cdn.sign("datasets", "HuggingFaceFW/fineweb-edu", sha, SHARD0, ttl_s=60)
    assert request(cdn_server.url, "GET", fresh.replace("000_00000", "001_00000"))[0] == 403
    cdn_server.set_faults(Faults(refuse_ranges=True))
    status, headers, body = request(cdn_server.url, "GET", fresh, {"Range": "bytes=0-9"})
    assert status == 200 and len(body) == int(headers["Content-Length"]) > 10
    assert [r["fault"] for r in cdn_server.flush()] == ["refused", "refused", None]


def test_a_relative_location_leads_to_the_hubs_own_cdn_path(hub):
    """redirect_to '' with signing: the Location has no host, and the same server serves the signed path."""
    location, _ = _signed_location(hub, "")
    assert location.startswith("/cdn/datasets/")
    assert request(hub.url, "GET", location, {"Range": "bytes=0-3"})[0:3:2] == (206, b"PAR1")


@pytest.fixture
def cdn_server(cdn):
    """The `cdn` fixture's server, named apart from the cdn module."""
    return cdn

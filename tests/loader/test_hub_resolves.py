"""A Hub file is resolved once per node (fwe_cli/loader/remote/resolve_cache.py, hub_get.py), against the test Hub
redirecting its resolves to signed CDN URLs as the Hub does (tests/hubsim/cdn.py: a second server, another
host:port): reads go to the CDN, threads and processes of a node share one resolve, a refused URL is resolved again
a few times at most, a CDN ignoring Range sends the reads back to the Hub, and every request is counted by kind.
In this process (a forked child for a second process); the epoch-long runs, URL expiry and many ranks are in
tests/loader/test_hub_resolves_runs.py."""

from __future__ import annotations

import threading

import pytest

from fwe_cli.errors import SourceError
from fwe_cli.loader.hub.listing import resolve_listing
from fwe_cli.loader.hub.ranges import fetch_range
from fwe_cli.loader.remote.hub_env import hub_requests, requests_sent, resolve_url
from fwe_cli.loader.remote.resolve_cache import UNKNOWN_TTL_S, url_lifetime
from tests.helpers import in_forked_child
from tests.hubsim.faults import Faults
from tests.hubsim.repos import CONFIG_NAME, DATA_DIR, DATASET_REPO

CHILD_TIMEOUT_S = 120  # a bound for a forked child's reads, not a timing check


def _signed(hub, cdn, ttl_s: float = 3600, **faults):
    """The Hub redirecting parquet resolves to `cdn`'s signed URLs; the first file's (resolve URL, bytes on disk)."""
    hub.set_faults(redirect_match=r"resolve/.*\.parquet", redirect_to=cdn.url if cdn else "", sign_ttl_s=ttl_s,
                   **faults)
    listing = resolve_listing(DATASET_REPO, CONFIG_NAME, "train")
    hub.new_log("reads")
    file = listing.files[0]
    return resolve_url(DATASET_REPO, listing.revision, file.path), file


def _disk(hubsim_root, file) -> bytes:
    return (hubsim_root / "datasets" / DATASET_REPO / file.path).read_bytes()


def _kinds(records) -> list[tuple[str, int]]:
    return [(r["kind"], r["status"]) for r in records]


def test_reads_go_to_the_cdn_after_one_resolve_and_the_token_never_does(hub_env, cdn, hubsim_root, monkeypatch):
    """Three ranges of one file: one request to the Hub's resolver (answered 302, with the token), three reads from
    the CDN's signed URL (without it), bytes exact; the process's counts say the same by kind."""
    monkeypatch.setenv("HF_TOKEN", "hf_test_secret")
    url, file = _signed(hub_env, cdn)
    data, mark = _disk(hubsim_root, file), requests_sent()
    for start, end in ((0, 100), (file.size - 4096, file.size), (1000, 5000)):
        assert fetch_range(url, start, end) == data[start:end]
    assert [(r["kind"], r["status"], r["auth"]) for r in hub_env.requests()] == [("resolve", 302, True)]
    assert [(r["kind"], r["status"], r["auth"]) for r in cdn.flush()] == [("cdn", 206, False)] * 3
    assert hub_requests(since=mark) == {"resolver": 1, "api": 0, "cdn": 3, "re_resolves": 0, "failed_resolves": 0,
                                        "range_fallbacks": 0}


def test_a_resolve_answered_503_is_counted_failed_and_asked_again(hub_env, cdn, hubsim_root):
    """The resolver answers the first resolve 503: the read is retried, the resolver asked once more (two resolves,
    the first counted in `failed_resolves`), then every read goes to the CDN; bytes exact."""
    url, file = _signed(hub_env, cdn, fail_count=1, fail_status=503, fail_match=r"resolve/.*\.parquet")
    data, mark = _disk(hubsim_root, file), requests_sent()
    assert fetch_range(url, 0, 100) == data[:100]
    assert fetch_range(url, 1000, 5000) == data[1000:5000]
    assert [(r["kind"], r["status"]) for r in hub_env.requests()] == [("resolve", 503), ("resolve", 302)]
    counted = hub_requests(since=mark)
    assert (counted["resolver"], counted["failed_resolves"], counted["re_resolves"]) == (2, 1, 0)


def test_a_relative_location_is_read_on_the_hubs_own_host(hub_env, hubsim_root):
    """A resolve answered with a Location without a host (the signed path on the Hub's own host): the reads follow
    it there, one resolve for all of them."""
    url, file = _signed(hub_env, None)
    data = _disk(hubsim_root, file)
    assert fetch_range(url, 10, 20) == data[10:20] and fetch_range(url, 30, 40) == data[30:40]
    assert _kinds(hub_env.requests()) == [("resolve", 302), ("cdn", 206), ("cdn", 206)]


def test_threads_and_processes_of_a_node_share_one_resolve(hub_env, cdn, hubsim_root):
    """A forked child (another process of the node) resolves the file and reads a range; then 8 threads of this
    process read ranges at once: the node sends the resolver one request in all, and every read is exact."""
    url, file = _signed(hub_env, cdn)
    data = _disk(hubsim_root, file)
    assert in_forked_child(lambda: fetch_range(url, 0, 64) == data[:64], CHILD_TIMEOUT_S)
    got: dict[int, bytes] = {}
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, fetch_range(url, i * 1000, i * 1000 + 500)))
               for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == {i: data[i * 1000:i * 1000 + 500] for i in range(8)}
    assert _kinds(hub_env.requests()) == [("resolve", 302)]
    assert len(cdn.flush()) == 9


def test_a_url_the_cdn_refuses_once_is_resolved_again_and_the_read_succeeds(hub_env, cdn, hubsim_root):
    """The CDN answers 403 to the first (fresh) signed URL: the file is resolved again and read from the new URL;
    two resolves, and the re-resolve counted."""
    url, file = _signed(hub_env, cdn)
    cdn.set_faults(Faults(fail_count=1, fail_status=403, fail_match="^GET /cdn/"))
    mark = requests_sent()
    assert fetch_range(url, 5, 50) == _disk(hubsim_root, file)[5:50]
    assert _kinds(hub_env.requests()) == [("resolve", 302), ("resolve", 302)]
    assert _kinds(cdn.flush()) == [("cdn", 403), ("cdn", 206)]
    assert hub_requests(since=mark)["re_resolves"] == 1


def test_a_cdn_refusing_every_fresh_url_fails_in_one_line_naming_the_file_and_status(hub_env, cdn):
    """A CDN that answers 403 to every URL (a clock far off, a revoked signature): three fresh resolves, each
    refused, then one SourceError line naming the file and HTTP 403; nothing is retried past that."""
    url, file = _signed(hub_env, cdn)
    cdn.set_faults(Faults(fail_count=100, fail_status=403, fail_match="^GET /cdn/"))
    with pytest.raises(SourceError) as failed:
        fetch_range(url, 0, 10)
    line = str(failed.value)
    assert "\n" not in line and file.path in line and "HTTP 403" in line and "3 times" in line
    assert _kinds(hub_env.requests()) == [("resolve", 302)] * 3
    assert _kinds(cdn.flush()) == [("cdn", 403)] * 3


def test_a_cdn_ignoring_range_sends_the_files_reads_to_the_hubs_own_range_answer(hub_env, cdn, hubsim_root):
    """The first read's resolve is redirected to a CDN that answers a Range with the whole file (200): that read
    takes its bytes from it; the file's next reads go to the Hub's URL, which answers Range itself (206), counted
    as range fallbacks; every read is exact."""
    url, file = _signed(hub_env, cdn)
    hub_env.set_faults(redirect_match=r"range=bytes=0-99$", redirect_to=cdn.url, sign_ttl_s=3600)
    cdn.set_faults(Faults(refuse_ranges=True))
    data, mark = _disk(hubsim_root, file), requests_sent()
    for start, end in ((0, 100), (2000, 3000), (file.size - 10, file.size)):
        assert fetch_range(url, start, end) == data[start:end]
    assert _kinds(hub_env.requests()) == [("resolve", 302), ("resolve", 206), ("resolve", 206)]
    assert _kinds(cdn.flush()) == [("cdn", 200)]
    assert hub_requests(since=mark)["range_fallbacks"] == 2


def test_a_hub_serving_its_files_itself_is_read_as_before(hub_env, hubsim_root):
    """No redirect (a small file, a mirror): each read is the Hub's own 206, one request each, as before."""
    listing = resolve_listing(DATASET_REPO, CONFIG_NAME, "train")
    hub_env.new_log("reads")
    url = resolve_url(DATASET_REPO, listing.revision, listing.files[1].path)
    data = _disk(hubsim_root, listing.files[1])
    assert [fetch_range(url, a, a + 7) for a in (0, 70, 700)] == [data[a:a + 7] for a in (0, 70, 700)]
    assert _kinds(hub_env.requests()) == [("resolve", 206)] * 3
    assert listing.files[1].path.startswith(DATA_DIR)


def test_a_urls_lifetime_is_read_from_its_signature():
    """CloudFront's Expires, S3's X-Amz-Date + X-Amz-Expires (the Hub's cas-bridge URLs) and GCS's X-Goog-* give
    the seconds a URL stays valid; one that says nothing lives UNKNOWN_TTL_S."""
    now = 1_775_739_074.0  # 2026-04-09T12:51:14Z
    assert url_lifetime("https://cdn-lfs.hf.co/x?Expires=1775739374&Signature=s", now) == 300
    amz = "https://cas-bridge.xethub.hf.co/x?X-Amz-Date=20260409T125114Z&X-Amz-Expires=3600&X-Amz-Signature=s"
    assert url_lifetime(amz, now) == 3600
    assert url_lifetime(amz.replace("X-Amz", "X-Goog"), now + 600) == 3000
    assert url_lifetime("https://mirror.example/x", now) == UNKNOWN_TTL_S

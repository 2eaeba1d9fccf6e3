"""The test Hub server itself, spoken to with http.client: Hub-shaped answers, Range reads, errors, faults,
the request log and the RTT proxy. Fast (no Hub client imported); the client-level tests are in
tests/measure/test_hub_smoke.py and tests/hubsim/test_clients.py.

Every request here is sent after the previous answer came back, so the log's arrival order (seq) is the
order of the calls; hub.requests() returns it once the server has logged every answer (flush)."""

from __future__ import annotations

import hashlib
import http.client
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pyarrow.parquet as pq
import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from tests.hubsim import handler
from tests.hubsim.fixtures import TEST_SPEC
from tests.hubsim.repos import DATASET_REPO, MODEL_REPO, SCHEMA
from tests.hubsim.requestlog import read_log

DS = f"/datasets/{DATASET_REPO}"
API = f"/api/datasets/{DATASET_REPO}"
SHARD0 = "sample/10BT/000_00000.parquet"
SCORED = ("scored/000_00000.parquet", "scored/001_00000.parquet")  # the config for row filters


def request(url: str, method: str, path: str, headers: dict | None = None, timeout: float = 10.0):
    """(status, headers dict, body bytes) of one request on a fresh connection."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha_of(hub) -> str:
    return orjson.loads(request(hub.url, "GET", f"{API}/revision/main")[2])["sha"]


def test_repos_have_the_real_schema_row_groups_and_names(hubsim_root):
    """Shards are named 000_00000.parquet..., have the ten-column schema, 1,000-row row groups, and row i
    is synthetic_record(seed, i) across shards."""
    files = sorted((hubsim_root / "datasets" / DATASET_REPO / "sample" / "10BT").glob("*.parquet"))
    assert [f.name for f in files] == ["000_00000.parquet", "001_00000.parquet"]
    meta = pq.ParquetFile(files[1]).metadata
    assert pq.read_schema(files[0]) == SCHEMA
    assert all(meta.row_group(i).num_rows == TEST_SPEC.row_group_rows for i in range(meta.num_row_groups))
    first_of_second = pq.read_table(files[1]).slice(0, 1).to_pylist()[0]
    rows_in_first = pq.ParquetFile(files[0]).metadata.num_rows
    assert first_of_second == synthetic_record(TEST_SPEC.seed, rows_in_first)
    card = (hubsim_root / "datasets" / DATASET_REPO / "README.md").read_text()
    assert "config_name: sample-10BT" in card and "path: sample/10BT/*.parquet" in card
    assert (hubsim_root / "models" / MODEL_REPO / "tokenizer.json").stat().st_size > 1_000_000


def test_head_resolve_carries_commit_etag_and_length(hub, hubsim_root):
    """HEAD of a file: X-Repo-Commit (the revision sha), ETag (git blob sha1), Content-Length, no body."""
    status, headers, body = request(hub.url, "HEAD", f"{DS}/resolve/main/README.md")
    data = (hubsim_root / "datasets" / DATASET_REPO / "README.md").read_bytes()
    assert status == 200 and body == b""
    assert headers["X-Repo-Commit"] == sha_of(hub)
    assert headers["ETag"] == f'"{git_blob_sha1(data)}"'
    assert int(headers["Content-Length"]) == len(data)


def test_parquet_is_lfs_with_sha256_etag(hub, hubsim_root):
    """An LFS file: ETag and X-Linked-Etag are the sha256 of the content; the tree lists lfs.oid the same."""
    data = (hubsim_root / "datasets" / DATASET_REPO / SHARD0).read_bytes()
    _, headers, _ = request(hub.url, "HEAD", f"{DS}/resolve/main/{SHARD0}")
    digest = hashlib.sha256(data).hexdigest()
    assert headers["ETag"] == headers["X-Linked-Etag"] == f'"{digest}"'
    tree = orjson.loads(request(hub.url, "GET", f"{API}/tree/main/sample%2F10BT")[2])
    entry = next(e for e in tree if e["path"] == SHARD0)
    assert entry["lfs"]["oid"] == digest and entry["size"] == len(data)


@pytest.mark.parametrize("header, first, last", [("bytes=100-199", 100, 199), ("bytes=-10", None, None),
                                                  ("bytes=5-", 5, None)])
def test_range_reads_answer_206_with_content_range(hub, hubsim_root, header, first, last):
    """Range -> 206, Content-Range 'bytes A-B/SIZE' and exactly those bytes (suffix and open ranges too)."""
    data = (hubsim_root / "datasets" / DATASET_REPO / SHARD0).read_bytes()
    size = len(data)
    first = size - 10 if first is None else first
    last = size - 1 if last is None else last
    status, headers, body = request(hub.url, "GET", f"{DS}/resolve/main/{SHARD0}", {"Range": header})
    assert status == 206
    assert headers["Content-Range"] == f"bytes {first}-{last}/{size}"
    assert body == data[first:last + 1]


def test_unsatisfiable_range_is_416(hub):
    """A range past the end is refused with 416 and Content-Range 'bytes */SIZE'."""
    status, headers, _ = request(hub.url, "GET", f"{DS}/resolve/main/README.md", {"Range": "bytes=999999-"})
    assert status == 416 and headers["Content-Range"].startswith("bytes */")


def test_revision_info_and_repo_info(hub):
    """/revision/{rev} and the revision-less info give the same sha, all siblings and the card's configs."""
    status, _, body = request(hub.url, "GET", f"{API}/revision/main")
    info = orjson.loads(body)
    assert status == 200 and len(info["sha"]) == 40
    assert {s["rfilename"] for s in info["siblings"]} == {"README.md", SHARD0, "sample/10BT/001_00000.parquet",
                                                          *SCORED}
    config = info["cardData"]["configs"][0]
    assert config == {"config_name": "sample-10BT", "data_files": [{"split": "train", "path": "sample/10BT/*.parquet"}]}
    assert orjson.loads(request(hub.url, "GET", API)[2])["sha"] == info["sha"]
    assert orjson.loads(request(hub.url, "GET", f"{API}/revision/{info['sha']}")[2])["sha"] == info["sha"]
    model = orjson.loads(request(hub.url, "GET", f"/api/models/{MODEL_REPO}")[2])
    assert model["modelId"] == MODEL_REPO and {"README.md", "tokenizer.json"} <= {s["rfilename"] for s in model["siblings"]}


def test_main_moves_and_the_commit_before_stays_readable_by_its_sha(moving_hub):
    """After `move_main`, main (info, HEAD's X-Repo-Commit, siblings) is the new commit without the first shard;
    the commit before still answers by its sha, files included; a sha the repo never had is RevisionNotFound."""
    before, after = moving_hub.move_main()
    assert before != after and sha_of(moving_hub) == after
    info = orjson.loads(request(moving_hub.url, "GET", f"{API}/revision/main")[2])
    assert {s["rfilename"] for s in info["siblings"]} == {"README.md", "sample/10BT/001_00000.parquet", *SCORED}
    status, headers, _ = request(moving_hub.url, "HEAD", f"{DS}/resolve/main/{SHARD0}")
    assert status == 404 and headers["X-Repo-Commit"] == after
    status, headers, _ = request(moving_hub.url, "HEAD", f"{DS}/resolve/{before}/{SHARD0}")
    assert status == 200 and headers["X-Repo-Commit"] == before
    old = orjson.loads(request(moving_hub.url, "GET", f"{API}/revision/{before}")[2])
    assert old["sha"] == before and SHARD0 in {s["rfilename"] for s in old["siblings"]}
    assert request(moving_hub.url, "GET", f"{API}/revision/{'0' * 40}")[1]["X-Error-Code"] == "RevisionNotFound"


@pytest.mark.parametrize("method, path, status, code", [
    ("GET", "/api/datasets/nobody/nothing/revision/main", 401, "RepoNotFound"),
    ("HEAD", "/datasets/nobody/nothing/resolve/main/README.md", 401, "RepoNotFound"),
    ("GET", f"{API}/revision/v9", 404, "RevisionNotFound"),
    ("HEAD", f"{DS}/resolve/main/fineweb-edu.py", 404, "EntryNotFound"),
    ("GET", f"{API}/tree/main/no/such/dir", 404, "EntryNotFound"),
])
def test_errors_carry_hub_error_codes(hub, method, path, status, code):
    """Missing repo / revision / file answer like the Hub: status plus X-Error-Code (clients map these)."""
    got, headers, _ = request(hub.url, method, path)
    assert (got, headers.get("X-Error-Code")) == (status, code)
    if code == "EntryNotFound":
        assert headers["X-Repo-Commit"] == sha_of(hub), "lets huggingface_hub cache the miss"


def test_tree_path_may_be_url_encoded_and_pages_follow_link(hub, monkeypatch):
    """'sample%2F10BT' lists the same as 'sample/10BT'; with small pages, Link rel=next walks all entries."""
    encoded = orjson.loads(request(hub.url, "GET", f"{API}/tree/main/sample%2F10BT?recursive=false&expand=false")[2])
    plain = orjson.loads(request(hub.url, "GET", f"{API}/tree/main/sample/10BT")[2])
    assert encoded == plain and [e["path"] for e in plain] == [SHARD0, "sample/10BT/001_00000.parquet"]
    full = orjson.loads(request(hub.url, "GET", f"{API}/tree/main?recursive=true")[2])
    assert {e["type"] for e in full} == {"file", "directory"} and len(full) == 5 + 1 + len(SCORED)
    monkeypatch.setattr(handler, "TREE_PAGE", 2)
    pages, path = [], f"{API}/tree/main?recursive=true"
    while path:
        _, headers, body = request(hub.url, "GET", path)
        pages.append(orjson.loads(body))
        link = headers.get("Link")
        path = urlsplit(link[1:link.index(">")]).path + "?" + urlsplit(link[1:link.index(">")]).query if link else None
    assert [len(p) for p in pages] == [2] * (len(full) // 2) + [len(full) % 2] * (len(full) % 2)
    assert [e for p in pages for e in p] == full


def test_agent_harnesses_and_unknown_endpoints(hub):
    """/api/agent-harnesses answers the empty registry; an unknown endpoint is a logged 404."""
    status, _, body = request(hub.url, "GET", "/api/agent-harnesses")
    assert status == 200 and orjson.loads(body) == {"standardEnvVars": [], "harnesses": {}}
    assert request(hub.url, "GET", "/api/spaces/x/y")[0] == 404
    assert [r["status"] for r in hub.requests()] == [200, 404]


def test_fail_count_then_success_with_retry_after(hub):
    """fail_count=2 x 429 with Retry-After: exactly the first two matching requests fail, with the header;
    requests that do not match are never failed."""
    hub.set_faults(fail_count=2, fail_status=429, retry_after=3, fail_match="README")
    assert request(hub.url, "GET", "/api/agent-harnesses")[0] == 200
    answers = [request(hub.url, "GET", f"{DS}/resolve/main/README.md") for _ in range(3)]
    assert [a[0] for a in answers] == [429, 429, 200]
    assert answers[0][1]["Retry-After"] == "3"
    assert [r["fault"] for r in hub.requests()] == [None, "fail", "fail", None]


def test_fail_distinct_spreads_failures_over_different_requests(hub):
    """With fail_distinct, a repeated request line is failed once, so the second failure hits another."""
    hub.set_faults(fail_count=2, fail_distinct=True, fail_match="resolve")
    statuses = [request(hub.url, "HEAD", f"{DS}/resolve/main/{p}")[0] for p in ("README.md", "README.md", SHARD0)]
    assert statuses == [503, 200, 503]


def test_drop_cuts_the_body_after_k_bytes_once(hub):
    """drop_after_bytes=1000: the first matching answer sends its full Content-Length header, 1000 body
    bytes, then the connection ends; the next answer is whole."""
    hub.set_faults(drop_after_bytes=1000, drop_match="parquet")
    with pytest.raises(http.client.IncompleteRead) as cut:
        request(hub.url, "GET", f"{DS}/resolve/main/{SHARD0}", {"Range": "bytes=0-99999"})
    assert len(cut.value.partial) == 1000
    status, _, body = request(hub.url, "GET", f"{DS}/resolve/main/{SHARD0}", {"Range": "bytes=0-99999"})
    assert status == 206 and len(body) == 100_000
    assert [(r["fault"], r["bytes"]) for r in hub.requests()] == [("drop", 1000), (None, 100_000)]


def test_stall_never_answers_until_faults_change(hub):
    """A stalled request gets no answer (the client times out); it is logged as 'stall' on arrival."""
    hub.set_faults(stall_match="agent-harnesses")
    with pytest.raises((socket.timeout, TimeoutError)):
        request(hub.url, "GET", "/api/agent-harnesses", timeout=0.5)
    assert [r["fault"] for r in hub.requests()] == ["stall"]
    hub.set_faults()
    assert request(hub.url, "GET", "/api/agent-harnesses")[0] == 200


def test_hangup_closes_the_connection_after_an_answer_that_did_not_say_so(hub):
    """hangup_match: the answer is whole and carries no `Connection: close`, then the server closes the connection
    (the next request on it finds it closed); unmatched requests keep theirs."""
    hub.set_faults(hangup_match="README")
    closed = hub.server.closed_connections
    conn = http.client.HTTPConnection("127.0.0.1", hub.server.port, timeout=10)
    try:
        conn.request("GET", f"{DS}/resolve/main/README.md")
        answer = conn.getresponse()
        assert answer.status == 200 and answer.getheader("Connection") is None and answer.read()
        assert hub.server.wait_closed(closed + 1)
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            conn.request("GET", "/api/agent-harnesses")
            conn.getresponse()
    finally:
        conn.close()
    assert [r["fault"] for r in hub.requests()] == ["hangup"]


def test_unanswered_requests_get_their_connection_closed_then_answers_come(hub):
    """unanswered_count=1: the first matching request's connection is closed without an answer (logged as
    'unanswered', no status); the next is answered."""
    hub.set_faults(unanswered_count=1, unanswered_match="agent")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        request(hub.url, "GET", "/api/agent-harnesses")
    assert request(hub.url, "GET", "/api/agent-harnesses")[0] == 200
    assert [(r["fault"], r["status"]) for r in hub.requests()] == [("unanswered", None), (None, 200)]


def test_redirect_sends_a_resolve_to_the_cdn_with_the_hubs_headers_or_back_to_itself(hub):
    """redirect_match + redirect_to: a resolve is answered 302 to redirect_to + the same path, with the file's
    X-Repo-Commit and ETag; an API call, 302 without them; redirect_to '' sends it back to the same path."""
    sha = sha_of(hub)
    hub.set_faults(redirect_match="README|revision", redirect_to="http://cdn.example:81")
    status, headers, body = request(hub.url, "GET", f"{DS}/resolve/main/README.md")
    assert status == 302 and body == b"" and headers["Location"] == f"http://cdn.example:81{DS}/resolve/main/README.md"
    assert headers["X-Repo-Commit"] == sha and headers["ETag"]
    status, headers, _ = request(hub.url, "GET", f"{API}/revision/main")
    assert status == 302 and "X-Repo-Commit" not in headers
    hub.set_faults(redirect_match="README")
    status, headers, _ = request(hub.url, "HEAD", f"{DS}/resolve/main/README.md")
    assert status == 302 and headers["Location"] == f"{DS}/resolve/main/README.md" and "X-Repo-Commit" not in headers


def test_delay_is_added_to_every_request(hub):
    """delay_s=0.2: each answer takes at least the injected 0.2 s (lower bound only)."""
    hub.set_faults(delay_s=0.2)
    for _ in range(2):
        started = time.monotonic()
        assert request(hub.url, "GET", "/api/agent-harnesses")[0] == 200
        assert time.monotonic() - started >= 0.2


def test_burst_makes_the_same_matching_requests_late_every_time(hub):
    """burst_every=2 on README reads: the README lines whose crc32 is even are late by at least the burst delay and
    logged as 'burst', on every pass alike, whatever came before; other requests are never late."""
    import zlib

    hub.set_faults(burst_every=2, burst_delay_s=0.3, burst_match="README")
    paths = [f"README{i}.md" for i in range(6)] + ["x"]
    expected = [p != "x" and zlib.crc32(f"HEAD {DS}/resolve/main/{p}".encode()) % 2 == 0 for p in paths]
    assert 0 < sum(expected) < 6  # the rule picks some of the README lines, not all
    for _ in range(2):
        for path, late in zip(paths, expected):
            started = time.monotonic()
            request(hub.url, "HEAD", f"{DS}/resolve/main/{path}")
            assert not late or time.monotonic() - started >= 0.3  # a lower bound only: any request may be slow
    assert [r["fault"] == "burst" for r in hub.requests()] == expected * 2
    with pytest.raises(ValueError, match="burst_every must be >= 0"):
        hub.set_faults(burst_every=-1)


def test_request_log_file_mirrors_memory_with_templated_endpoints(hub):
    """The JSON-lines log holds the same records; endpoints replace repo ids, shas and shard numbers."""
    sha = sha_of(hub)
    request(hub.url, "GET", f"{DS}/resolve/{sha}/{SHARD0}", {"Range": "bytes=0-9"})
    records = hub.requests()
    assert read_log(hub.workdir / "requests.jsonl") == records
    assert [r["endpoint"] for r in records] == ["GET /api/datasets/{repo}/revision/main",
                                                "GET /datasets/{repo}/resolve/{sha}/sample/10BT/{shard}.parquet"]
    assert records[1]["range"] == "bytes=0-9" and records[1]["status"] == 206 and records[1]["bytes"] == 10


def test_request_is_logged_in_the_log_current_at_its_arrival(hub):
    """A request that arrives before new_log() and is answered after it lands in the old log, not the new
    one (so a test's log never holds the previous test's requests); the log holds it once answered."""
    hub.set_faults(delay_s=0.3)
    old_log = hub.server.log
    answer = {}
    sender = threading.Thread(target=lambda: answer.update(status=request(hub.url, "GET", "/api/agent-harnesses")[0]))
    sender.start()
    deadline = time.monotonic() + 30
    while hub.server.in_flight == 0 and time.monotonic() < deadline:  # the request has arrived
        time.sleep(0.005)
    assert hub.server.in_flight == 1
    hub.new_log("after")
    sender.join(timeout=30)
    assert answer == {"status": 200}
    assert hub.requests() == []
    assert [(r["seq"], r["endpoint"]) for r in old_log.records()] == [(1, "GET /api/agent-harnesses")]


def test_rtt_proxy_adds_round_trips_and_keeps_bytes(hub, hubsim_root):
    """Through the proxy (rtt 0.1 s, 2 handshake RTTs) the first answer on a connection takes >= 0.3 s,
    the next on the same connection >= 0.1 s, and the bytes are unchanged."""
    rtt = 0.1
    proxy = hub.add_rtt(rtt, handshake_rtts=2)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    timings = []
    for _ in range(2):
        started = time.monotonic()
        conn.request("GET", f"{DS}/resolve/main/{SHARD0}")
        body = conn.getresponse().read()
        timings.append(time.monotonic() - started)
    conn.close()
    assert body == (hubsim_root / "datasets" / DATASET_REPO / SHARD0).read_bytes()
    assert timings[0] >= 3 * rtt and timings[1] >= rtt
    assert proxy.connections == 1 and {r["conn"] for r in hub.requests()} == {hub.requests()[0]["conn"]}


def test_build_writes_manifest(tmp_path: Path):
    """build_repos with 2 shards and a tiny size still writes one full row group per shard and a manifest."""
    from tests.hubsim.repos import BuildSpec, build_repos

    manifest = build_repos(tmp_path, BuildSpec(mb=0.1, shards=2, seed=3, row_group_rows=50))
    assert [s["rows"] for s in manifest["shards"]] == [50, 50] and manifest["rows"] == 100
    assert orjson.loads((tmp_path / "hubsim.json").read_bytes()) == manifest
    with pytest.raises(ValueError, match="shards"):
        BuildSpec(shards=0)


def test_link_books_bytes_one_after_another_across_connections():
    """A Link carries one chunk after the other whoever books it: two 1 MB chunks ready at 0 on an 8 Mbit/s link
    are through at 1 s and 2 s; a chunk ready after the link fell idle starts when it is ready."""
    from tests.hubsim.proxy import Link

    link = Link(8e6)
    assert link.book(0.0, 10**6) == pytest.approx(1.0)
    assert link.book(0.0, 10**6) == pytest.approx(2.0)
    assert link.book(5.0, 500_000) == pytest.approx(5.5)
    with pytest.raises(ValueError):
        Link(0)


def test_bandwidth_limited_proxy_keeps_bytes_and_paces_them_at_the_rate(hub, hubsim_root):
    """Through RttProxy(bandwidth_bps=16 Mbit/s) a whole shard arrives unchanged, and every byte of it went through
    the link's pacing: the downlink booked at least the shard's bytes back to back, so its schedule ends no sooner
    than size over the rate after its first chunk could go (the writer sends no chunk before its booked time). Read
    from the proxy's own pacing record, not from a clock, so it holds whatever the machine's load."""
    from tests.hubsim.proxy import RttProxy

    data = (hubsim_root / "datasets" / DATASET_REPO / SHARD0).read_bytes()
    rate = 16e6
    with RttProxy(("127.0.0.1", hub.server.port), rtt_s=0.0, handshake_rtts=0, bandwidth_bps=rate) as proxy:
        status, _, body = request(proxy.url, "GET", f"{DS}/resolve/main/{SHARD0}")
        up, down = proxy.links
    assert status == 200 and body == data
    assert 0 < up.booked_bytes < 4096  # the request went through the uplink too
    assert down.booked_bytes >= len(data)  # the body and the answer's headers
    assert down.free_at - down.first_start >= down.booked_bytes * 8 / rate * (1 - 1e-9) >= len(data) * 8 / rate


def test_per_connection_caps_pace_each_connection_on_its_own_link(hub, hubsim_root):
    """Through RttProxy(per_connection_bps=16 Mbit/s) two connections each get a link of their own: each shard
    arrives unchanged, and each connection's downlink booked its own body at that rate (its schedule spans at least
    its bytes over the rate), so connections add up instead of sharing. From the proxy's pacing record, not a clock."""
    from tests.hubsim.proxy import RttProxy

    data = (hubsim_root / "datasets" / DATASET_REPO / SHARD0).read_bytes()
    rate = 16e6
    with RttProxy(("127.0.0.1", hub.server.port), rtt_s=0.0, handshake_rtts=0, per_connection_bps=rate) as proxy:
        bodies = [request(proxy.url, "GET", f"{DS}/resolve/main/{SHARD0}")[2] for _ in range(2)]
        links = list(proxy.connection_links)
    assert bodies == [data, data] and proxy.links == (None, None)
    assert len(links) == 2 and links[0][1] is not links[1][1]
    for up, down in links:
        assert 0 < up.booked_bytes < 4096 and down.booked_bytes >= len(data)
        assert down.free_at - down.first_start >= len(data) * 8 / rate

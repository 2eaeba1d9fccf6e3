"""fwe's own HTTP to the Hub (fwe_cli/loader/remote/http.py, on urllib3), against the test Hub server: kept-alive
connections and the ones the server closed, redirects and the token, proxies, the errors transient.py classifies,
offline mode, ranges, and the request count."""

from __future__ import annotations

import socket
import sys
import types

import pytest

from fwe_cli.loader.hub.api import dataset_at
from fwe_cli.loader.hub.ranges import fetch_range
from fwe_cli.loader.remote import hub_env as hub_env_module
from fwe_cli.loader.remote.http import (
    MAX_REDIRECTS,
    ConnectError,
    HttpStatusError,
    OfflineModeIsEnabled,
    TooManyRedirects,
    head,
    request,
)
from fwe_cli.loader.remote.hub_env import note_request, requests_sent, resolve_url
from fwe_cli.loader.remote.transient import transient_reason, unreachable_reason
from fwe_cli.loader.tokenization.hub_fetch import fetch_hub_file
from tests.helpers import in_forked_child
from tests.hubsim.repos import DATASET_REPO, MODEL_REPO

CARD = f"/datasets/{DATASET_REPO}/resolve/main/README.md"

CHILD_TIMEOUT_S = 120  # a bound for a forked child's one request, not a timing check


def _card(hubsim_root) -> bytes:
    return (hubsim_root / "datasets" / DATASET_REPO / "README.md").read_bytes()


def test_requests_one_after_another_share_one_kept_alive_connection(hub_env, hubsim_root):
    """Three answers read to their end: one TCP connection carries all three, and a range comes back exact."""
    data = _card(hubsim_root)
    for _ in range(2):
        with request("GET", hub_env.url + CARD) as answer:
            assert answer.status == 200 and answer.read() == data
    with request("GET", hub_env.url + CARD, {"Range": "bytes=3-9"}) as answer:
        assert answer.status == 206 and answer.read() == data[3:10]
    records = hub_env.requests()
    assert len(records) == 3 and len({r["conn"] for r in records}) == 1


def test_kept_connections_the_server_closed_unannounced_are_replaced_however_many(hub_env, hubsim_root):
    """A Hub that closes each connection after answering, without a `Connection: close`, with two of them idle in
    the pool: the next request is answered, on a new connection, instead of failing on the closed ones."""
    data = _card(hubsim_root)
    hub_env.set_faults(hangup_match="")
    closed = hub_env.server.closed_connections
    first = request("GET", hub_env.url + CARD)
    second = request("GET", hub_env.url + CARD)  # while the first holds its connection: a second one
    for answer in (first, second):
        assert answer.read() == data
        answer.close()
    assert hub_env.server.wait_closed(closed + 2)  # both idle connections are closed on the server's side
    hub_env.set_faults()
    with request("GET", hub_env.url + CARD) as answer:
        assert answer.read() == data
    records = hub_env.requests()
    assert [r["fault"] for r in records] == ["hangup", "hangup", None] and len({r["conn"] for r in records}) == 3


def test_a_request_the_server_closed_without_answering_is_sent_again(hub_env, hubsim_root):
    """The server reads a request and closes its connection without a word (a keep-alive that ran out as the
    request went out), twice in a row: the request is sent again each time, on another connection, and answered."""
    hub_env.set_faults(unanswered_count=2)
    with request("GET", hub_env.url + CARD) as answer:
        assert answer.read() == _card(hubsim_root)
    assert [r["fault"] for r in hub_env.requests()] == ["unanswered", "unanswered", None]


def test_a_forked_child_sends_on_connections_of_its_own(hub_env, hubsim_root):
    """After a fork the child's request goes on a new connection, never on the one the parent keeps (two processes
    writing on one socket would mix their requests); the parent goes on with its own."""
    with request("GET", hub_env.url + CARD) as answer:
        answer.read()
    def child_request() -> bool:
        with request("GET", hub_env.url + CARD) as answer:
            return answer.read() == _card(hubsim_root)

    assert in_forked_child(child_request, CHILD_TIMEOUT_S), "the forked child's request was not answered right"
    with request("GET", hub_env.url + CARD) as answer:
        answer.read()
    conns = [r["conn"] for r in hub_env.requests()]
    assert len(conns) == 3 and conns[1] != conns[0] == conns[2]


def test_too_many_redirects_is_one_error_from_every_path_and_is_not_retried(hub_env):
    """A redirect loop met by the tokenizer fetch, a HEAD, the listing's API call and a range read: each ends in
    TooManyRedirects (the caller's own error chains it), which transient.py calls neither transient nor unreachable,
    so each call sends MAX_REDIRECTS + 1 requests and no retry."""
    hub_env.set_faults(redirect_match="")  # every request: 302 back to itself
    calls = [lambda: fetch_hub_file(MODEL_REPO, "tokenizer.json"),
             lambda: head(resolve_url(DATASET_REPO, "main", "README.md"), 5.0),
             lambda: dataset_at(DATASET_REPO, "main"),
             lambda: fetch_range(resolve_url(DATASET_REPO, "main", "README.md"), 0, 10)]
    for call in calls:
        hub_env.new_log("loop")
        with pytest.raises(Exception) as failed:
            call()
        chain, error = [], failed.value
        while error is not None:
            chain.append(error)
            error = error.__cause__ or error.__context__
        assert any(isinstance(e, TooManyRedirects) for e in chain), chain
        assert transient_reason(failed.value) is None and unreachable_reason(failed.value) is None
        assert len(hub_env.requests()) == MAX_REDIRECTS + 1


def test_the_token_goes_to_the_hubs_host_only_never_after_a_redirect_to_another(hub_env, cdn, monkeypatch,
                                                                                hubsim_root):
    """HF_TOKEN set and the Hub redirecting its file reads to a CDN on another host:port: the request to the Hub
    carries Authorization, the one to the CDN does not; the body comes from the CDN with the Hub's X-Repo-Commit.
    A HEAD ends at the Hub's own answer (no request to the CDN)."""
    monkeypatch.setenv("HF_TOKEN", "hf_test_secret")
    hub_env.set_faults(redirect_match="resolve", redirect_to=cdn.url)
    sha = dataset_at(DATASET_REPO, "main")["sha"]
    hub_env.new_log("read")
    with request("GET", hub_env.url + CARD) as answer:
        assert answer.read() == _card(hubsim_root) and answer.headers["x-repo-commit"] == sha
        assert answer.url.startswith(cdn.url)
    assert [(r["status"], r["auth"]) for r in hub_env.requests()] == [(302, True)]
    assert [(r["status"], r["auth"]) for r in cdn.flush()] == [(200, False)]
    hub_env.new_log("head")
    assert head(hub_env.url + CARD, 5.0)["x-repo-commit"] == sha
    assert [(r["method"], r["status"], r["auth"]) for r in hub_env.requests()] == [("HEAD", 302, True)]
    assert len(cdn.flush()) == 1


def test_the_environments_proxy_is_used_unless_no_proxy_names_the_host(hub_env, monkeypatch, hubsim_root):
    """http_proxy set: a request for another host goes to the proxy (here the test server, which answers an
    absolute request line as a forward proxy passes it on) with the whole URL; a host no_proxy names is reached
    directly."""
    monkeypatch.setenv("http_proxy", hub_env.url)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with request("GET", f"http://hub.invalid:8{CARD}") as answer:
        assert answer.read() == _card(hubsim_root)
    with request("GET", hub_env.url + CARD) as answer:
        assert answer.status == 200
    assert [r["path"] for r in hub_env.requests()] == [f"http://hub.invalid:8{CARD}", CARD]


def test_an_error_status_is_an_http_status_error_that_transient_classifies(hub_env):
    """404 is an HttpStatusError with the status (not retried); 503 with Retry-After is transient, its wait read."""
    with pytest.raises(HttpStatusError) as missing:
        request("GET", hub_env.url + f"/datasets/{DATASET_REPO}/resolve/main/nothing.txt")
    assert missing.value.response.status_code == 404 and transient_reason(missing.value) is None
    hub_env.set_faults(fail_count=1, fail_status=503, retry_after=2)
    with pytest.raises(HttpStatusError) as busy:
        request("GET", hub_env.url + CARD)
    assert transient_reason(busy.value) == ("HTTP 503", 2.0)


def test_a_cut_answer_is_a_connection_error_and_a_silent_one_a_timeout(hub_env):
    """An answer cut mid-body: ConnectionError (transient, not unreachable); an answer that does not come within
    the timeout: TimeoutError (transient and unreachable)."""
    hub_env.set_faults(drop_after_bytes=10, drop_match="README")
    with pytest.raises(ConnectionError) as cut, request("GET", hub_env.url + CARD) as answer:
        answer.read()
    assert transient_reason(cut.value) is not None and unreachable_reason(cut.value) is None
    hub_env.set_faults(stall_match="README")
    with pytest.raises(TimeoutError) as silent:
        request("GET", hub_env.url + CARD, timeout=0.5)
    assert transient_reason(silent.value) is not None and unreachable_reason(silent.value) is not None


def test_a_refused_connection_is_unreachable_and_offline_mode_sends_nothing(hub_env, monkeypatch):
    """Nothing listening: ConnectError, which transient.py calls unreachable (no retry). HF_HUB_OFFLINE=1: no
    request at all, and the error says offline."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectError) as refused:
        request("HEAD", f"http://127.0.0.1:{port}{CARD}", timeout=5)
    assert unreachable_reason(refused.value) is not None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineModeIsEnabled):
        request("HEAD", hub_env.url + CARD)
    assert hub_env.requests() == [] and unreachable_reason(OfflineModeIsEnabled("x")) is not None


def _accounting_bytes() -> int:
    """Bytes held by hub_env's module-level data (its functions and imports aside)."""
    return sum(sys.getsizeof(value) for name, value in vars(hub_env_module).items()
               if not name.startswith("__") and not callable(value) and not isinstance(value, types.ModuleType))


def test_request_accounting_is_a_count_that_does_not_grow_with_the_requests(hub_env):
    """Requests are counted, not recorded one by one: 100,000 more leave hub_env's state the same size, and
    requests_sent() moves by exactly as many as were sent (fwe's own requests included)."""
    before, size = requests_sent(), _accounting_bytes()
    for _ in range(100_000):
        note_request()
    with request("HEAD", hub_env.url + CARD):
        pass
    assert requests_sent() - before == 100_001
    assert _accounting_bytes() == size

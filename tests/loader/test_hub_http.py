"""fwe's own HTTP to the Hub (fwe_cli/loader/hub_http.py), against the test Hub server: kept-alive connections, the
errors transient.py classifies, offline mode, ranges."""

from __future__ import annotations

import socket

import pytest

from fwe_cli.loader.hub_env import HttpStatusError
from fwe_cli.loader.hub_http import ConnectError, OfflineModeIsEnabled, request
from fwe_cli.loader.transient import transient_reason, unreachable_reason
from tests.hubsim.repos import DATASET_REPO

CARD = f"/datasets/{DATASET_REPO}/resolve/main/README.md"


def test_requests_one_after_another_share_one_kept_alive_connection(hub_env, hubsim_root):
    """Three answers read to their end: one TCP connection carries all three, and a range comes back exact."""
    data = (hubsim_root / "datasets" / DATASET_REPO / "README.md").read_bytes()
    for _ in range(2):
        with request("GET", hub_env.url + CARD) as answer:
            assert answer.status == 200 and answer.read() == data
    with request("GET", hub_env.url + CARD, {"Range": "bytes=3-9"}) as answer:
        assert answer.status == 206 and answer.read() == data[3:10]
    records = hub_env.requests()
    assert len(records) == 3 and len({r["conn"] for r in records}) == 1


def test_an_error_status_is_an_http_status_error_that_transient_classifies(hub_env):
    """404 is an HttpStatusError with the status (not retried); 503 with Retry-After is transient, its wait read."""
    with pytest.raises(HttpStatusError) as missing:
        request("GET", hub_env.url + f"/datasets/{DATASET_REPO}/resolve/main/nothing.txt")
    assert missing.value.response.status_code == 404 and transient_reason(missing.value) is None
    hub_env.set_faults(fail_count=1, fail_status=503, retry_after=2)
    with pytest.raises(HttpStatusError) as busy:
        request("GET", hub_env.url + CARD)
    assert transient_reason(busy.value) == ("HTTP 503", 2.0)


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

"""A Hub that cannot be reached ends `fwe smoke` with exit 4 and one line that names the endpoint and the ways on
(HF_HUB_OFFLINE=1 with a warm cache, --local-path, --source synthetic), not with a timeout; --synthetic-on-fail
then falls back loudly, exits 0 and records the fallback. Two endpoints: one that refuses connections, one that
accepts them and never answers. In-process: the native reader reads HF_ENDPOINT when it is used."""

from __future__ import annotations

import socket

import orjson
import pytest

from tests.helpers import invoke


@pytest.fixture
def refusing():
    """An endpoint on 127.0.0.1 with nothing listening: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def silent():
    """An endpoint that accepts connections (the kernel's backlog) and never sends a byte."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def smoke(endpoint: str, tmp_path, *extra: str):
    env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
           "HF_HUB_OFFLINE": None}
    return invoke("smoke", "--source", "hub", "--tokenizer", "byte", "--json", "--timeout", "60",
                  "--artifacts-dir", str(tmp_path / "artifacts"), *extra, env=env)


@pytest.mark.parametrize("reader", ["native", "datasets"])
@pytest.mark.parametrize("endpoint_kind", ["refusing", "silent"])
def test_unreachable_hub_is_a_source_error_naming_the_endpoint_and_the_ways_on(endpoint_kind, reader, request,
                                                                               tmp_path):
    """Both readers: exit 4 (source error, not 3: the run did not wait out its 60 s timeout, nor a minute of
    `datasets` retries), error.type SourceError, and one line saying which endpoint could not be reached and what
    to do instead."""
    endpoint = request.getfixturevalue(endpoint_kind)
    result = smoke(endpoint, tmp_path, "--hub-reader", reader)
    assert result.exit_code == 4, result.stderr
    error = orjson.loads(result.stdout)["error"]
    assert error["type"] == "SourceError"
    message = error["message"]
    assert "\n" not in message and f"cannot reach the Hub at {endpoint}" in message
    for way in ("HF_HUB_OFFLINE=1", "--local-path", "--source synthetic"):
        assert way in message
    assert f"cannot reach the Hub at {endpoint}" in result.stderr


def test_synthetic_on_fail_rescues_an_unreachable_hub_loudly(refusing, tmp_path):
    """With --synthetic-on-fail the same failure falls back to synthetic data: exit 0, the one JSON object (ok true,
    exit_code 0, no error) recording the fallback (from hub, with the unreachable reason), and the warning on
    stderr."""
    result = smoke(refusing, tmp_path, "--synthetic-on-fail")
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)  # orjson refuses trailing data: a second object would fail here
    assert data["ok"] is True and data["exit_code"] == 0 and data["error"] is None
    assert data["fallback"]["from_source"] == "hub" and data["fallback"]["to_source"] == "synthetic"
    assert "cannot reach the Hub" in data["fallback"]["reason"]
    assert "FALLBACK" in result.stderr

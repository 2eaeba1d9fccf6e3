"""`fwe doctor`: one report of what a bug report needs; it reports problems and does not fail on them (exit 0 unless
its own arguments are bad), and it contacts the Hub at most once (never with HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import socket

import orjson
import pytest

from tests.helpers import invoke
from tests.loader.test_hub_unreachable import refusing  # noqa: F401  (a fixture: nothing listens there)

SECTIONS = {"fwe", "versions", "host", "disk", "env", "hf_cache", "hub", "tokenizer", "torch", "problems", "ok",
            "exit_code", "error", "command"}


def doctor(tmp_path, endpoint: str, *args: str, offline: str = "0"):
    env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
           "HF_HUB_OFFLINE": offline}
    result = invoke("doctor", "--json", "--artifacts-dir", str(tmp_path / "artifacts"), *args, env=env)
    assert result.exit_code == 0, result.stderr
    return orjson.loads(result.stdout), result.stderr


@pytest.fixture
def listening():
    """A port that accepts connections into its backlog and never answers: a connection to it stays queued, so the
    test can see whether anything connected."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server


def test_doctor_help_names_what_it_reports():
    """--help says what doctor reports, that it exits 0 on problems, and its flags."""
    result = invoke("doctor", "--help")
    assert result.exit_code == 0
    for needle in ("--json", "--local-path", "--out", "--hub-timeout", "HF_HUB_OFFLINE", "exit 0"):
        assert needle in result.stdout, needle


def test_doctor_json_has_every_section(tmp_path, refusing):
    """--json prints one object with every section (versions, host, disk for each path given, env, HF cache, Hub,
    tokenizer, torch, problems, and with --ranks the Hub resolves the job would send) plus ok/exit_code/error; the
    same report is a table on stderr."""
    data, stderr = doctor(tmp_path, refusing, "--local-path", str(tmp_path / "data"), "--out", str(tmp_path / "o"),
                          "--ranks", "1024", "--workers", "8", "--tokens-per-s", "128e6")
    assert SECTIONS <= set(data) and data["exit_code"] == 0 and data["error"] is None
    assert data["versions"]["fwe"] == data["fwe"] and "numpy" in data["versions"]
    assert data["host"]["cpus_usable"] >= 1 and data["host"]["ram_total_gb"] > 0
    assert [d["role"] for d in data["disk"]] == ["artifacts", "local-path", "out"]
    assert all(d["free_gb"] is not None and not d["exists"] for d in data["disk"])  # measured where they would go
    cache = data["hf_cache"]
    assert cache["hub_cache"] == str(tmp_path / "hf" / "hub") and cache["listing"] is None
    assert cache["tokenizer"]["hub_repo"] == "openai-community/gpt2" and cache["tokenizer"]["packaged_offline"]
    assert data["tokenizer"]["gpt2_packaged"] is True
    assert data["torch"]["installed"] in (True, False) and "detail" in data["torch"]
    quota = data["hub_quota"]
    assert quota["nodes"] == 128 and quota["dataset"]["files"] == 14 and "sample-10BT" in quota["source"]
    assert quota["after"]["per_5_min_warm"] < quota["quota_5_min"]["free"] < quota["before"]["per_5_min"]
    assert "fwe doctor" in stderr and "hub resolves" in stderr


def test_offline_doctor_makes_no_connection(tmp_path, listening):
    """HF_HUB_OFFLINE=1: the Hub section says offline and nothing connects (the endpoint's backlog stays empty),
    and the missing listing is reported as a problem, still exit 0."""
    endpoint = f"http://127.0.0.1:{listening.getsockname()[1]}"
    data, _ = doctor(tmp_path, endpoint, offline="1")
    assert data["hub"]["offline"] is True and data["hub"]["reachable"] is None and data["hub"]["rtt_ms"] is None
    listening.setblocking(False)
    with pytest.raises(BlockingIOError):
        listening.accept()  # a connection attempt would be waiting here
    assert any("HF_HUB_OFFLINE=1" in p for p in data["problems"]) and data["ok"] is False


def test_doctor_against_the_test_hub_reports_it_reachable_with_one_head(tmp_path, hub):
    """Against a working Hub: reachable, HTTP 200, the commit main points at and a round-trip time, from exactly one
    HEAD request; after a Hub smoke the cached listing and head cache are reported too."""
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
           "HF_HUB_OFFLINE": "0"}
    smoke = invoke("smoke", "--source", "hub", "--tokenizer", "byte", "--batches", "1",
                   "--artifacts-dir", str(tmp_path / "a"), env=env)
    assert smoke.exit_code == 0, smoke.stderr
    hub.new_log("doctor")
    data, stderr = doctor(tmp_path, hub.url)
    assert data["hub"]["reachable"] is True and data["hub"]["status"] == 200
    assert isinstance(data["hub"]["rtt_ms"], float) and data["hub"]["rtt_ms"] >= 0
    listing = data["hf_cache"]["listing"]
    assert listing is not None and listing["files"] == 2 and data["hub"]["commit"] == listing["commit"]
    assert data["hf_cache"]["head_cache"]["entries"] > 0
    assert [r["method"] for r in hub.requests()] == ["HEAD"]
    assert "reachable" in stderr


def test_doctor_against_a_refusing_endpoint_reports_unreachable_and_exits_0(tmp_path, refusing):
    """Nothing listening at HF_ENDPOINT: the Hub is reported unreachable (connection refused: no wait for a timeout)
    with the endpoint in the problems, and doctor still exits 0."""
    data, stderr = doctor(tmp_path, refusing)
    assert data["hub"]["reachable"] is False and data["hub"]["rtt_ms"] is None
    assert "ConnectionRefusedError" in data["hub"]["detail"]
    assert any(refusing in p for p in data["problems"]) and data["ok"] is False
    assert "unreachable" in stderr

"""`fwe measure` against the test Hub: a cold cache costs more requests and more time opening the source."""

from __future__ import annotations

import orjson

from tests.helpers import run_fwe

RTT_S = 0.03  # per exchange: makes every extra round trip of the cold run visible in its phases


def test_cold_run_makes_more_requests_and_opens_slower_than_warm(hub, tmp_path):
    """Both runs succeed; cold sends more HTTP requests than warm, spends longer in source_opened (handshake,
    metadata, listing), and the client-side counts of both runs add up to the server's request log."""
    hub.add_rtt(RTT_S)
    proc = run_fwe("measure", "--cold", "--warm", "--source", "hub", "--tokenizer", "gpt2", "--steps", "5",
                   "--batch", "2", "--json", "--artifacts-dir", str(tmp_path), env=hub.env(hub.new_home()),
                   timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = orjson.loads(proc.stdout)
    cold, warm = summary["runs"]
    assert (cold["kind"], warm["kind"]) == ("cold", "warm")
    assert cold["error"] is None and warm["error"] is None
    assert cold["requests"] > warm["requests"] > 0
    assert cold["phases"]["source_opened"] > warm["phases"]["source_opened"]
    assert cold["requests_by_phase"]["tokenizer_ready"] >= 1  # tokenizer.json downloaded cold
    assert cold["requests"] + warm["requests"] == len(hub.requests())
    on_disk = orjson.loads(open(summary["artifact"], "rb").read())
    assert [r["requests"] for r in on_disk["runs"]] == [cold["requests"], warm["requests"]]
    assert hub.violations() == []

"""`fwe measure --cold --warm` against the test Hub: a cold cache costs more requests before the first batch.

No wall-clock comparison here: "cold opens slower than warm" flips under CPU load (phase times include CPU
work that a busy machine stretches by more than the extra round trips cost), so that figure is measured by
scripts/bench_hub_cold_warm.py (JSON under artifacts/bench/). The test checks its cause, the extra requests,
which no load can change.
"""

from __future__ import annotations

import orjson

from tests.helpers import invoke


def test_cold_run_makes_more_requests_than_warm_above_all_while_opening_the_source(hub, tmp_path):
    """Both runs succeed; cold sends more HTTP requests than warm, in all and before its first batch (tokenizer
    download, listing and first reads; warm they come from the cache), and the client-side counts of both runs add
    up to the server's request log, but for the one request each run's abandoned read-ahead may send after counting.
    (The tokenizer loads beside the source's opening, so which of those phases a request falls in is not fixed.)

    In-process through `invoke`: the measure parent imports no Hub client (each run is a fresh, sealed child
    that inherits the client environment), so nothing global to this process is touched."""
    result = invoke("measure", "--cold", "--warm", "--source", "hub", "--tokenizer", "gpt2", "--steps", "2",
                    "--batch", "2", "--json", "--artifacts-dir", str(tmp_path), env=hub.env(hub.new_home()))
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    cold, warm = summary["runs"]
    assert (cold["kind"], warm["kind"]) == ("cold", "warm")
    assert cold["error"] is None and warm["error"] is None
    assert cold["requests"] > warm["requests"] > 0
    for run in (cold, warm):
        assert sum(run["requests_by_phase"].values()) <= run["requests"]
    before_first = {run["kind"]: sum(n for phase, n in run["requests_by_phase"].items() if phase != "warmup_filled")
                    for run in (cold, warm)}
    assert before_first["cold"] > before_first["warm"] >= 1
    # each run's read-ahead may send one request the run no longer counts (see AFTER_COUNT_SLACK in test_hub_smoke)
    assert 0 <= len(hub.requests()) - (cold["requests"] + warm["requests"]) <= 2
    on_disk = orjson.loads(open(summary["artifact"], "rb").read())
    assert [r["requests"] for r in on_disk["runs"]] == [cold["requests"], warm["requests"]]
    assert hub.violations() == []

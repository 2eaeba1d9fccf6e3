"""`python -m scripts.bench.hub_start` runs end to end against the test Hub: the 10-line `datasets` + `tokenizers`
script and `fwe smoke --source hub` each run cold and warm in sealed processes, and every run hands over the SAME
first 8x1024 batch, token for token (fwe's Hub path must keep `datasets`' row order and the ids(doc) + [eos] packing).
The floor (the interpreter and one HEAD) runs beside them. The JSON carries every figure and verdict issues #12 and
#26's acceptance ask for; no speed is asserted here."""

import os
import subprocess
import sys
from pathlib import Path

import orjson

from scripts.bench.hub_start import peers
from tests.helpers import REPO_ROOT


def test_benchmark_runs_and_both_peers_fetch_the_same_first_batch(hubsim_root, tmp_path):
    """1 rep, no warm-up, the session's ~4 MB root, 5 ms RTT, an --fwe-arg passed through: exit 0, identical batches,
    the whole JSON shape, written as hub_start-<UTC>.json into the --out folder (its path the one line on stdout)."""
    cmd = [sys.executable, "-m", "scripts.bench.hub_start", "--reps", "1", "--warmup", "0", "--rtt-ms", "5",
           "--root", str(hubsim_root), "--fwe-arg=--doc-batch=64", "--out", str(tmp_path)]
    # USE_TORCH=0: `datasets` would import torch in each of the script's runs, and torch plays no part in the batch
    # compared here (the benchmark itself runs the script as its users do)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                          env=dict(os.environ, USE_TORCH="0"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = Path(proc.stdout.strip())
    assert written.parent == tmp_path and written.name.startswith("hub_start-") and written.suffix == ".json"
    report = orjson.loads(written.read_bytes())
    assert report["bench"] == "hub_start" and report["args"]["reps"] == 1

    assert report["first_batch_identical"] is True and report["all_runs_ok"] is True
    assert report["sealed_violations"] == []
    assert [(r["peer"], r["cache"]) for r in report["runs"]] == [
        ("script", "cold"), ("floor", "cold"), ("fwe", "cold"), ("script", "warm"), ("floor", "warm"), ("fwe", "warm")]
    for run in report["runs"]:
        if run["peer"] == "floor":  # the interpreter and one HEAD: no batch
            assert run["rc"] == 0 and run["server_requests"] == 1 and run["batch_shape"] is None, run
            continue
        assert run["rc"] == 0 and run["batch_shape"] == [8, 1024] and run["batch_identical"] is True, run
        assert run["server_requests"] == len(run["server_requests_detail"]) > 0
        if run["peer"] == "fwe":
            # fwe counts the requests it sent through huggingface_hub; this server logged those, and at most one
            # more that the abandoned read-ahead sent after the count (see test_hub_smoke's AFTER_COUNT_SLACK)
            assert run["fwe_ok"] is True and 0 <= run["server_requests"] - run["fwe_requests"] <= 1
            assert run["first_batch_s"] > 0

    assert set(report["summary"]) == {"script", "floor", "fwe"}
    for peer, by_cache in report["summary"].items():
        assert set(by_cache) == {"cold", "warm"}
        for entry in by_cache.values():
            assert entry["wall_s_median"] > 0 and len(entry["wall_s"]) == 1
            if peer == "fwe":
                assert entry["first_batch_s_median"] > 0 and entry["fwe_requests_median"] > 0
    verdict = report["acceptance"]["fwe"]
    assert {c: verdict[c]["limit"] for c in ("cold", "warm", "warm_to_floor")} == {
        "cold": 0.2, "warm": 0.12, "warm_to_floor": 1.5}
    for cache in ("cold", "warm"):
        figures = verdict[cache]
        assert abs(figures["ratio"] - figures["fwe_wall_s"] / figures["script_wall_s"]) < 1e-3
        assert figures["pass"] == (figures["ratio"] <= figures["limit"])
    assert verdict["warm_requests_first_batch"]["max"] == 1
    assert report["pass"] == verdict["pass"]

    assert report["settings"]["rtt_ms"] == 5 and report["root"]["reused"] is True
    assert report["root"]["manifest"]["shards"] and report["root"]["manifest"]["config"] == "sample-10BT"
    assert "peers/hf_stream_first_batch.py" in report["commands"]["script"]
    assert "smoke --source hub --tokenizer gpt2 --batch 8 --seq-len 1024 --batches 1" in report["commands"]["fwe"]
    assert report["commands"]["fwe"].endswith(" --doc-batch=64")
    assert report["env"]["HF_ENDPOINT"].startswith("http://127.0.0.1:")
    assert len(report["load_avg"]["before"]) == 3 and report["host"] and report["versions"] and report["fwe_version"]


def test_one_fwe_peer_per_hub_reader():
    """--hub-reader a,b makes one fwe peer per reader, each with `--hub-reader R` before the --fwe-arg flags."""
    assert peers([], ["--q=4"]) == {"fwe": ["--q=4"]}
    assert peers(["native", "datasets"], ["--q=4"]) == {"fwe[native]": ["--hub-reader", "native", "--q=4"],
                                                        "fwe[datasets]": ["--hub-reader", "datasets", "--q=4"]}

"""`fwe smoke --source hub --tokenizer gpt2` against the test Hub server, through the unmodified clients.

Every run is a subprocess sealed onto 127.0.0.1 (see tests/hubsim/fixtures.py); each test also checks
that no client tried to leave. The cold and warm runs are made once for the module and shared.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.helpers import run_fwe
from tests.hubsim.fixtures import HubRun

SMOKE_TIMEOUT_S = 60.0  # generous: a loaded 2-core box takes ~3-5 s per run
STALL_TIMEOUT_S = 5.0

# What the clients call on a cold cache (huggingface_hub 2.4, datasets 5.2, telemetry off), in order.
# A client upgrade that changes this list fails test_cold_endpoint_list_is_pinned: update it knowingly.
COLD_ENDPOINTS = [
    "HEAD /{repo}/resolve/main/tokenizer.json",
    "GET /{repo}/resolve/main/tokenizer.json",
    "HEAD /datasets/{repo}/resolve/main/README.md",
    "GET /datasets/{repo}/resolve/main/README.md",
    "HEAD /datasets/{repo}/resolve/{sha}/fineweb-edu.py",
    "GET /api/datasets/{repo}/revision/{sha}",
    "HEAD /datasets/{repo}/resolve/{sha}/.huggingface.yaml",
    "GET /api/datasets/{repo}/tree/{sha}/sample%2F10BT?recursive=false&expand=false",
    "GET /api/datasets/{repo}/tree/{sha}/sample?recursive=false&expand=false",
    "HEAD /datasets/{repo}/resolve/{sha}/dataset_infos.json",
    "GET /datasets/{repo}/resolve/{sha}/sample/10BT/{shard}.parquet",  # footer (last 64 KiB)
    "GET /datasets/{repo}/resolve/{sha}/sample/10BT/{shard}.parquet",  # footer again, on iteration
    "GET /datasets/{repo}/resolve/{sha}/sample/10BT/{shard}.parquet",  # bytes=4-: the data, streamed
]


def smoke(hub: HubRun, home: Path, workdir: Path, name: str, timeout: float = SMOKE_TIMEOUT_S):
    """Run fwe smoke against `hub` with HF_HOME `home`; returns (process, result dict or None, seconds)."""
    args = ["smoke", "--source", "hub", "--tokenizer", "gpt2", "--json", "--batches", "3", "--batch", "2",
            "--seq-len", "1024", "--timeout", f"{timeout:g}", "--artifacts-dir", str(workdir / f"artifacts_{name}"),
            "--save-batches", str(workdir / f"{name}.npz")]
    started = time.monotonic()
    proc = run_fwe(*args, env=hub.env(home), timeout=timeout + 60)
    elapsed = time.monotonic() - started
    result = orjson.loads(proc.stdout) if proc.stdout.strip() else None
    return proc, result, elapsed


def batches(path: Path) -> np.ndarray:
    with np.load(path) as saved:
        return saved["batches"]


class ColdWarm:
    def __init__(self, hub: HubRun, workdir: Path):
        home = hub.new_home()
        hub.new_log("cold")
        self.cold_proc, self.cold, _ = smoke(hub, home, workdir, "cold")
        self.cold_requests = hub.requests()
        hub.new_log("warm")
        self.warm_proc, self.warm, _ = smoke(hub, home, workdir, "warm")
        self.warm_requests = hub.requests()
        self.cold_batches = workdir / "cold.npz"
        self.warm_batches = workdir / "warm.npz"
        self.violations = hub.violations()


@pytest.fixture(scope="module")
def cold_warm(hubsim_server, tmp_path_factory) -> ColdWarm:
    workdir = tmp_path_factory.mktemp("cold_warm")
    run = HubRun(hubsim_server, workdir)
    try:
        return ColdWarm(run, workdir)
    finally:
        run.close()


def test_cold_smoke_streams_from_the_server(cold_warm):
    """A cold HF_HOME: tokenizer and dataset come from the server, all checks pass, exit 0."""
    assert cold_warm.cold_proc.returncode == 0, cold_warm.cold_proc.stderr
    result = cold_warm.cold
    assert result["ok"] is True and result["error"] is None
    assert result["source"] == {"kind": "hub", "dataset": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT",
                                "split": "train"}
    assert result["tokenizer"]["vocab_size"] == 50257 and result["tokenizer"]["eos_id"] == 50256
    assert result["batches"] == 3 and result["shape"] == [2, 1024]
    assert isinstance(result["first_batch_s"], float) and result["first_batch_s"] > 0
    parquet = [r for r in cold_warm.cold_requests if r["path"].endswith(".parquet")]
    assert parquet and all(r["status"] == 206 and r["range"] for r in parquet), "data came as Range reads"
    assert cold_warm.violations == []


def test_warm_run_makes_fewer_requests_and_identical_batches(cold_warm):
    """Warm (same HF_HOME): cached tokenizer and card cut requests; the batches are bit-identical."""
    assert cold_warm.warm_proc.returncode == 0, cold_warm.warm_proc.stderr
    cold, warm = cold_warm.cold_requests, cold_warm.warm_requests
    assert 0 < len(warm) < len(cold)
    assert "GET /{repo}/resolve/main/tokenizer.json" not in [r["endpoint"] for r in warm]
    cold_arr, warm_arr = batches(cold_warm.cold_batches), batches(cold_warm.warm_batches)
    assert cold_arr.shape == (3, 2, 1024)
    assert np.array_equal(cold_arr, warm_arr)
    assert cold_warm.violations == []


def test_cold_endpoint_list_is_pinned(cold_warm):
    """The cold request sequence is exactly COLD_ENDPOINTS: a client upgrade that changes it is noticed."""
    seen = [r["endpoint"].split(" range=")[0] for r in cold_warm.cold_requests]
    assert seen == COLD_ENDPOINTS
    assert all(r["status"] in (200, 206, 404) for r in cold_warm.cold_requests)
    probes = [r for r in cold_warm.cold_requests if r["status"] == 404]
    assert {r["path"].rsplit("/", 1)[1] for r in probes} == {"fineweb-edu.py", ".huggingface.yaml",
                                                               "dataset_infos.json"}


def test_transient_503s_and_a_dropped_connection_give_the_same_batches(hub, tmp_path, cold_warm):
    """2 x 503 (README GET: retried by fwe; parquet data read: retried by the client) and a cut revision
    answer (retried by fwe) cost time, not data: the batches equal the clean cold run's."""
    hub.set_faults(fail_count=2, fail_status=503, fail_distinct=True,
                   fail_match=r"^GET \S+/README\.md$|range=bytes=4-",
                   drop_after_bytes=100, drop_count=1, drop_match=r"/revision/")
    proc, result, _ = smoke(hub, hub.new_home(), tmp_path, "faulty")
    assert proc.returncode == 0, proc.stderr
    dealt = [(r["endpoint"].split(" ")[1].rsplit("/", 1)[-1], r["fault"]) for r in hub.requests() if r["fault"]]
    assert sorted(f for _, f in dealt) == ["drop", "fail", "fail"], dealt
    assert result["ok"] is True
    assert np.array_equal(batches(tmp_path / "faulty.npz"), batches(cold_warm.cold_batches))
    assert hub.violations() == []


@pytest.mark.parametrize("stall_match, stage", [
    (r"/tree/", "opening source (Hub handshake, metadata and file listing"),
    (r"range=bytes=4-", "reading first document"),
], ids=["file-listing", "data-read"])
def test_stalled_server_times_out_naming_the_step(hub, tmp_path, stall_match, stage):
    """A request that is never answered: exit code 3 within timeout + 2 s, error.stage names the step."""
    hub.set_faults(stall_match=stall_match)
    proc, result, elapsed = smoke(hub, hub.new_home(), tmp_path, "stalled", timeout=STALL_TIMEOUT_S)
    assert proc.returncode == 3, proc.stderr
    assert elapsed <= STALL_TIMEOUT_S + 2.0
    assert result["ok"] is False and result["error"]["type"] == "LoaderTimeout"
    assert result["error"]["stage"].startswith(stage)
    assert stage in proc.stderr
    assert [r["fault"] for r in hub.requests()].count("stall") == 1
    artifact = orjson.loads(Path(result["artifact"]).read_bytes())
    assert artifact["error"]["stage"] == result["error"]["stage"]
    assert hub.violations() == []


def test_added_rtt_cold_first_batch_and_request_count(hub, tmp_path):
    """50 ms RTT, cold cache: the artifact records first_batch_s and the number of requests (equal to the
    server log's); every request before the data costs at least one RTT, so first_batch_s >= (those +
    handshake RTTs) x RTT."""
    rtt = 0.05
    proxy = hub.add_rtt(rtt, handshake_rtts=2)
    proc, result, _ = smoke(hub, hub.new_home(), tmp_path, "rtt")
    assert proc.returncode == 0, proc.stderr
    artifact = orjson.loads(Path(result["artifact"]).read_bytes())
    requests = hub.requests()
    assert len(requests) == len(COLD_ENDPOINTS)
    assert artifact["requests"] == len(requests)
    assert proxy.connections >= 1
    assert len({r["conn"] for r in requests}) == proxy.connections, "every request came through the proxy"
    before_data = sum(1 for r in requests if not r["path"].endswith(".parquet")) + 1
    assert artifact["first_batch_s"] >= (before_data + 2) * rtt
    assert hub.violations() == []

"""`fwe smoke --source hub --tokenizer gpt2` against the test Hub server, through the unmodified clients.

Every run is a subprocess sealed onto 127.0.0.1 (see tests/hubsim/fixtures.py); each test also checks that no
client tried to leave. Subprocesses, not `invoke`: huggingface_hub reads HF_ENDPOINT once, at import (the runs
here use different endpoints: server, RTT proxy, other servers), the seal is a sitecustomize installed at
interpreter start, and smoke ends a process whose producer is stuck with os._exit (the stalled cases).

The module's runs are made once and shared (`runs`): the two stalled runs and the faulty run start first, in
the background, each on its own server (own faults, own request log); once both stalled runs have reached
their stalled request (an event from the server's log), the clean cold and warm runs go through a 50 ms RTT
proxy in the foreground. The stalled runs' --timeout wait and the faulty run's retry waits overlap the rest.

No wall-clock comparison: cold/warm timing figures come from `python -m tests.hubsim bench` and
scripts/bench_hub_cold_warm.py. The only time bounds are run_fwe's kill timeouts (a hang reaches them, a slow machine
does not) and lower bounds that added round trips guarantee.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.helpers import run_fwe
from tests.hubsim.fixtures import HubRun
from tests.hubsim.server import HubServer

SMOKE_TIMEOUT_S = 120.0  # a bound, not an expectation: a loaded 2-core box takes ~3-8 s per run
STALL_TIMEOUT_S = 30.0  # --timeout of the stalled runs, which is how long they last: their start must reach the
# stalled request before it (~1-3 s even with a CPU hog on one core, but over 10 s at a load of 20 on 2 cores; the
# fixture waits for it before loading the machine with other runs of its own)
CLIENT_READ_TIMEOUT_S = 600  # huggingface_hub's read timeout in the stalled runs (default 10 s): the client
# must not give up on the stalled request (and re-send it) before fwe's own deadline; without that deadline a
# stalled run would hang until run_fwe kills it (Smoke.finish then fails)
RTT_S = 0.05  # the cold and warm runs go through an RTT proxy: every request before the data costs >= 1 RTT
HANDSHAKE_RTTS = 2
STALLS = {"file-listing": (r"/paths-info/", "opening source (Hub file listing"),
          "data-read": (r"range=bytes=4-", "reading first document")}

# What a cold `fwe smoke` (native Hub reader, huggingface_hub 2.4, telemetry off) calls before its first batch.
# The tokenizer loads on its own thread beside the listing, so the two sequences interleave: compared as a
# multiset. A client upgrade that changes this list fails test_cold_endpoint_list_is_pinned: update it knowingly.
# The tokenizer.json comes with one GET of fwe's own (tokenization/hub_fetch.py), not hf_hub_download's HEAD + GET.
TOKENIZER_ENDPOINTS = ["GET /{repo}/resolve/main/tokenizer.json"]
LISTING_ENDPOINTS = ["GET /api/datasets/{repo}/revision/main", "POST /api/datasets/{repo}/paths-info/{sha}"]
PARQUET = "GET /datasets/{repo}/resolve/{sha}/sample/10BT/{shard}.parquet"
# the first file's footer and first row group hold the first batch; the reader fetches nothing else before it
COLD_ENDPOINTS = TOKENIZER_ENDPOINTS + LISTING_ENDPOINTS + [PARQUET] * 2
# After the first batch the read-ahead runs, and a run ends by abandoning it, so how far it got varies. The one
# read-ahead thread may have passed its last stop check and not yet sent its request when the run counts them:
# the server may log at most that one request more than the client counted.
AFTER_COUNT_SLACK = 1


def smoke_args(workdir: Path, name: str, timeout: float, reader: str) -> list[str]:
    return ["smoke", "--source", "hub", "--hub-reader", reader, "--tokenizer", "gpt2", "--json", "--batches", "3",
            "--batch", "2",
            "--seq-len", "1024", "--timeout", f"{timeout:g}", "--artifacts-dir", str(workdir / f"artifacts_{name}"),
            "--save-batches", str(workdir / f"{name}.npz")]


class Smoke:
    """One `fwe smoke` subprocess: started now (in a thread when background=True), `finish()` waits for it.
    proc (CompletedProcess, or None if run_fwe's kill timeout hit: `error`) and result (its JSON) are set by
    finish()."""

    def __init__(self, run: HubRun, name: str, timeout: float = SMOKE_TIMEOUT_S, extra_env: dict | None = None,
                 home: Path | None = None, background: bool = False, reader: str = "native"):
        self.run, self.name, self.timeout, self.reader = run, name, timeout, reader
        self.batches_path = run.workdir / f"{name}.npz"
        self.env = dict(run.env(home or run.new_home()), **(extra_env or {}))
        self.proc: subprocess.CompletedProcess | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"smoke-{name}", daemon=True)
        if background:
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            self.proc = run_fwe(*smoke_args(self.run.workdir, self.name, self.timeout, self.reader), env=self.env,
                                timeout=self.timeout + 60)
        except subprocess.TimeoutExpired as exc:  # kept and reported by the test that reads this run
            self.error = exc

    def wait(self) -> None:
        """Wait for a background run to end (run_fwe kills it after timeout + 60 s, so this returns)."""
        if self._thread.ident is not None:
            self._thread.join(self.timeout + 90)

    def finish(self) -> "Smoke":
        """Wait for the run; it must have ended by itself (not killed by run_fwe's timeout)."""
        self.wait()
        assert self.error is None and self.proc is not None, f"fwe smoke {self.name} did not end: {self.error}"
        return self

    @property
    def result(self) -> dict | None:
        return orjson.loads(self.proc.stdout) if self.proc.stdout.strip() else None


def batches(path: Path) -> np.ndarray:
    with np.load(path) as saved:
        return saved["batches"]


class OwnServer:
    """A second HubServer on the session's repos, for a background run whose faults and log are its own;
    `stalled` is set when the server logs a stalled request."""

    def __init__(self, root: Path, workdir: Path, **faults):
        self.stalled = threading.Event()
        self.server = HubServer(root, on_request=lambda r: self.stalled.set() if r["fault"] == "stall" else None)
        self.server.start()
        self.run = HubRun(self.server, workdir)
        self.run.set_faults(**faults)

    def close(self) -> None:
        self.run.close()
        self.server.stop()


class Runs:
    """The module's fwe smoke runs (see the module docstring)."""

    def __init__(self, hubsim_root: Path, hubsim_server: HubServer, workdir: Path):
        self.servers: dict[str, OwnServer] = {}
        self.stalled: dict[str, Smoke] = {}
        for case, (match, _) in STALLS.items():
            own = self.servers[case] = OwnServer(hubsim_root, workdir / f"stall-{case}", stall_match=match)
            self.stalled[case] = Smoke(own.run, "stalled", timeout=STALL_TIMEOUT_S, background=True,
                                       extra_env={"HF_HUB_DOWNLOAD_TIMEOUT": str(CLIENT_READ_TIMEOUT_S),
                                                  "HF_HUB_ETAG_TIMEOUT": str(CLIENT_READ_TIMEOUT_S)})
        # a condition, not a sleep: each stalled run has sent its stalled request (bounded by its own timeout)
        self.stall_reached = {case: self.servers[case].stalled.wait(STALL_TIMEOUT_S) for case in STALLS}
        faulty = self.servers["faulty"] = OwnServer(
            hubsim_root, workdir / "faulty", fail_count=2, fail_status=503, fail_distinct=True,
            fail_match=r"^GET \S+/README\.md$|range=bytes=4-", drop_after_bytes=100, drop_count=1,
            drop_match=r"/revision/")
        self.faulty = Smoke(faulty.run, "faulty", background=True, reader="datasets")
        self.clean = HubRun(hubsim_server, workdir / "clean")
        self.proxy = self.clean.add_rtt(RTT_S, handshake_rtts=HANDSHAKE_RTTS)
        home = self.clean.new_home()
        self.clean.new_log("cold")
        self.cold = Smoke(self.clean, "cold", home=home)
        self.cold_requests = self.clean.requests()
        self.cold_connections = self.proxy.connections
        self.clean.new_log("warm")
        self.warm = Smoke(self.clean, "warm", home=home)
        self.warm_requests = self.clean.requests()
        self.clean_violations = self.clean.violations()

    def close(self) -> None:
        for run in [*self.stalled.values(), self.faulty]:
            run.wait()
        self.clean.close()
        for own in self.servers.values():
            own.close()


@pytest.fixture(scope="module")
def runs(hubsim_root, hubsim_server, tmp_path_factory):
    made = Runs(hubsim_root, hubsim_server, tmp_path_factory.mktemp("hub_smoke"))
    yield made
    made.close()


def test_cold_smoke_streams_from_the_server(runs):
    """A cold HF_HOME: tokenizer and dataset come from the server, all checks pass, exit 0."""
    cold = runs.cold.finish()
    assert cold.proc.returncode == 0, cold.proc.stderr
    result = cold.result
    assert result["ok"] is True and result["error"] is None
    source = result["source"]
    assert {k: source[k] for k in ("kind", "dataset", "name", "split", "reader", "files", "bad_records")} == {
        "kind": "hub", "dataset": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT", "split": "train",
        "reader": "native", "files": 2, "bad_records": {"count": 0, "examples": []}}
    assert len(source["revision"]) == 40, "the artifact records the commit read"
    assert result["tokenizer"]["vocab_size"] == 50257 and result["tokenizer"]["eos_id"] == 50256
    assert result["batches"] == 3 and result["shape"] == [2, 1024]
    assert isinstance(result["first_batch_s"], float) and result["first_batch_s"] > 0
    parquet = [r for r in runs.cold_requests if r["path"].endswith(".parquet")]
    assert parquet and all(r["status"] == 206 and r["range"] for r in parquet), "data came as Range reads"
    assert runs.clean_violations == []


def test_warm_run_makes_fewer_requests_and_identical_batches(runs):
    """Warm (same HF_HOME): the cached tokenizer, listing and head cache leave one request before the first batch,
    the HEAD that checks which commit main is (the first batch comes from row groups the head cache keeps decoded);
    any later request is the read-ahead's, a range past the cached ones; the batches are bit-identical."""
    warm = runs.warm.finish()
    assert warm.proc.returncode == 0, warm.proc.stderr
    assert warm.result["requests_first_batch"] == 1 and warm.result["source"]["head_cache"]["hits"] >= 1
    first, *later = [r["endpoint"].split(" range=")[0] for r in runs.warm_requests]
    assert first == "HEAD /datasets/{repo}/resolve/main/README.md" and set(later) <= {PARQUET}
    cold_arr, warm_arr = batches(runs.cold.batches_path), batches(warm.batches_path)
    assert cold_arr.shape == (3, 2, 1024)
    assert np.array_equal(cold_arr, warm_arr)
    assert runs.clean_violations == []


def test_cold_endpoint_list_is_pinned(runs):
    """Before its first batch a cold run sends exactly COLD_ENDPOINTS (as a multiset: tokenizer and listing run side
    by side), all answered; the listing's order is fixed where one request needs the last one's answer: the
    revision first, then paths-info and the first file's footer side by side (either may arrive first), then the
    row group; each parquet range read once."""
    cold = runs.cold.finish()
    seen = [r["endpoint"].split(" range=")[0] for r in runs.cold_requests]
    assert cold.result["requests_first_batch"] == len(COLD_ENDPOINTS)
    assert sorted(seen[:len(COLD_ENDPOINTS)]) == sorted(COLD_ENDPOINTS)
    assert all(r["status"] in (200, 206) for r in runs.cold_requests)
    listing_then_data = [e for e in seen if e not in TOKENIZER_ENDPOINTS]
    assert listing_then_data[0] == LISTING_ENDPOINTS[0]
    assert sorted(listing_then_data[1:3]) == sorted([LISTING_ENDPOINTS[1], PARQUET])
    assert listing_then_data[3] == PARQUET and set(listing_then_data[3:]) == {PARQUET}
    ranges = [(r["path"], r["range"]) for r in runs.cold_requests if r["path"].endswith(".parquet")]
    assert len(ranges) == len(set(ranges))


def test_added_rtt_cold_first_batch_and_request_count(runs):
    """50 ms RTT, cold cache: the artifact records first_batch_s and the number of requests (equal to the
    server log's); three requests follow one another (the revision; paths-info beside the first footer; a row
    group), each costing at least one RTT, so first_batch_s >= 3 x RTT (a lower bound the proxy guarantees; load
    only adds to it; the connections' handshakes may be done before the loader starts: the `fwe` process opens them
    as soon as it has read the command's words)."""
    cold = runs.cold.finish()
    assert cold.proc.returncode == 0, cold.proc.stderr
    artifact = orjson.loads(Path(cold.result["artifact"]).read_bytes())
    requests = runs.cold_requests
    assert 0 <= len(requests) - artifact["requests"] <= AFTER_COUNT_SLACK
    assert runs.cold_connections >= 1
    # every request came through the proxy (a connection opened ahead of its request may carry none)
    assert 1 <= len({r["conn"] for r in requests}) <= runs.cold_connections
    assert artifact["first_batch_s"] >= 3 * RTT_S
    assert runs.clean_violations == []


def test_transient_503s_and_a_dropped_connection_give_the_same_batches(runs):
    """The `datasets` reader through faults: 2 x 503 (README GET: retried by fwe; parquet data read: retried by
    the client) and a cut revision answer (retried by fwe) cost time, not data: the batches equal the clean cold
    run's, which the native reader read (the two readers agree)."""
    faulty = runs.faulty.finish()
    own = runs.servers["faulty"].run
    assert faulty.proc.returncode == 0, faulty.proc.stderr
    dealt = [(r["endpoint"].split(" ")[1].rsplit("/", 1)[-1], r["fault"]) for r in own.requests() if r["fault"]]
    assert sorted(f for _, f in dealt) == ["drop", "fail", "fail"], dealt
    assert faulty.result["ok"] is True
    assert np.array_equal(batches(faulty.batches_path), batches(runs.cold.finish().batches_path))
    assert own.violations() == []


@pytest.mark.parametrize("case", list(STALLS), ids=list(STALLS))
def test_stalled_server_times_out_naming_the_step(runs, case):
    """A request that is never answered: the run reaches it, then exits by itself with code 3 (not killed by
    run_fwe: no hang), ended by the loader's own deadline (error.type LoaderTimeout, not the watchdog's
    HardTimeout) with error.stage naming the step, in the JSON, on stderr and in the artifact; exactly one request
    stalled (the client did not give up and re-send)."""
    _, stage = STALLS[case]
    assert runs.stall_reached[case], f"the stalled request was not reached within {STALL_TIMEOUT_S:g} s"
    stalled = runs.stalled[case].finish()
    own = runs.servers[case].run
    assert stalled.proc.returncode == 3, stalled.proc.stderr
    result = stalled.result
    assert result["ok"] is False and result["error"]["type"] == "LoaderTimeout", result["error"]
    assert result["error"]["stage"].startswith(stage)
    assert stage in stalled.proc.stderr
    assert [r["fault"] for r in own.requests()].count("stall") == 1
    artifact = orjson.loads(Path(result["artifact"]).read_bytes())
    assert artifact["error"]["stage"] == result["error"]["stage"]
    assert own.violations() == []

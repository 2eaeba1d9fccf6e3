"""What a Hub start begins before its loader exists (Source.start_early), and what it reads beside its listing:
- the `fwe` process hands a smoke's words to it as soon as it starts parsing, before typer checks them (which
  imports pydantic) and before the run imports numpy and the loader: a warm start's listing (its one HEAD) is then
  on its way; nothing is started offline, for a local or synthetic source, or for a command that reads no Hub; and
  only the invoked command's module is imported;
- the loader's source takes a listing started early over, once, only for the same stream, cache and endpoint;
- a cold listing reads the first file's footer beside its request for the files' sizes, and the reader finds it.
Processes are fresh and sealed (tests/hubsim/clientenv.py); the order of events in one is read from an audit hook,
never from a clock."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import orjson
import pytest

from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.hub.native import HubNative
from fwe_cli.loader.hub.ranges import FOOTER_PROBE
from tests.helpers import REPO_ROOT
from tests.hubsim.fixtures import HubRun

SMOKE = ("smoke", "--tokenizer", "gpt2", "--batch", "2", "--seq-len", "256", "--batches", "1", "--json")
OTHER_COMMANDS = ("measure_cmd", "tune_cmd", "bootstrap_cmd", "tokenize_cmd", "doctor_cmd", "report_cmd")
WATCHED = {"pydantic": "pydantic", "numpy": "numpy", "torch": "torch", **{f"fwe_cli.cli.{m}": m for m in OTHER_COMMANDS}}

# `fwe ARGS` (the console script's main) writing, in order, the heavy imports (WATCHED) and the sockets connected (an
# audit hook) and the threads started (by name), to the file named by argv[1]
PROBE = f"""
import sys
import threading

log = open(sys.argv[1], "a", buffering=1)
watched = {WATCHED!r}


def hook(event, args):
    if event == "import" and args[0] in watched:
        log.write("import " + watched[args[0]] + "\\n")
    elif event == "socket.connect":
        log.write("connect\\n")


def start(thread, _start=threading.Thread.start):
    log.write("thread " + thread.name + "\\n")
    _start(thread)


sys.addaudithook(hook)
threading.Thread.start = start
sys.argv = ["fwe", *sys.argv[2:]]
from fwe_cli.cli.app import main
main()
"""


def fwe_process(run: HubRun, home, tmp_path, *args: str, **env: str) -> tuple[dict, list[str]]:
    """(the --json object, the probe's events) of one fresh `fwe ARGS` process against the test Hub."""
    events = tmp_path / f"events{len(list(tmp_path.glob('events*')))}.txt"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(events), *args, "--artifacts-dir", str(tmp_path / "a")],
                          capture_output=True, env={**run.env(home), **env}, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return orjson.loads(proc.stdout), events.read_text().splitlines()


def before(events: list[str], first: str, then: str) -> bool:
    """Whether event `first` happened, and before `then` (or `then` never did)."""
    return first in events and (then not in events or events.index(first) < events.index(then))


def test_a_warm_smoke_process_sends_its_one_request_before_typer_checks_its_words(hubsim_server, tmp_path):
    """Warm: the listing thread (whose one request is the HEAD) starts before pydantic and numpy are imported, the run
    counts that request as its own (one, before the first batch) and replays the kept batch; cold: the listing and
    the tokenizer's download start before numpy is imported too, the run counts every request as its own, and the
    batches are the same. No other command's module is imported by either."""
    run = HubRun(hubsim_server, tmp_path / "hub")
    home = run.new_home()
    cold, cold_events = fwe_process(run, home, tmp_path, *SMOKE, "--save-batches", str(tmp_path / "cold.npz"))
    run.new_log("warm")
    warm, warm_events = fwe_process(run, home, tmp_path, *SMOKE, "--save-batches", str(tmp_path / "warm.npz"))
    warm_requests = run.requests()
    violations = run.violations()
    run.close()
    assert before(warm_events, "thread fwe-hub-listing", "import pydantic")
    assert before(warm_events, "thread fwe-hub-listing", "import numpy")
    assert (warm["requests"], warm["requests_first_batch"]) == (1, 1)
    assert [(r["method"], r["path"].split("/resolve/")[-1]) for r in warm_requests] == [("HEAD", "main/README.md")]
    assert warm["source"]["first_batches"]["replayed"] >= 1
    assert before(cold_events, "thread fwe-hub-listing", "import numpy")
    assert before(cold_events, "thread fwe-hub-file", "import numpy")
    assert cold["requests"] == cold["requests_first_batch"] >= 4  # listing (2), footer, row group, tokenizer
    assert not any(event.split()[-1] in OTHER_COMMANDS for event in cold_events + warm_events)
    with np.load(tmp_path / "cold.npz") as a, np.load(tmp_path / "warm.npz") as b:
        assert np.array_equal(a["batches"], b["batches"])
    assert violations == []


@pytest.mark.parametrize("words", [
    pytest.param(("--source", "synthetic"), id="synthetic"),
    pytest.param(("--local-path", "LOCAL"), id="local"),
    pytest.param(("--source", "hub", "OFFLINE"), id="offline"),
])
def test_nothing_is_started_early_offline_or_for_a_source_off_the_hub(hubsim_server, tmp_path, words):
    """With a warm cache in place: a synthetic or local source, or the Hub with HF_HUB_OFFLINE=1, starts no Hub
    thread and connects no socket before typer checks the words (nor at all: the byte tokenizer needs none)."""
    run = HubRun(hubsim_server, tmp_path / "hub")
    home = run.new_home()
    fwe_process(run, home, tmp_path, *SMOKE)  # a warm cache: what would make a Hub start send its HEAD early
    local = tmp_path / "docs.jsonl"
    local.write_bytes(b"".join(orjson.dumps({"text": f"document {i} " * 50}) + b"\n" for i in range(200)))
    env = {"HF_HUB_OFFLINE": "1"} if "OFFLINE" in words else {}
    words = tuple(str(local) if w == "LOCAL" else w for w in words if w != "OFFLINE")
    tokenizer = () if "OFFLINE" in env else ("--tokenizer", "byte")
    result, events = fwe_process(run, home, tmp_path, *SMOKE, *words, *tokenizer, **env)
    run.close()
    assert result["ok"] is True and "connect" not in events
    assert not any(e.startswith("thread fwe-hub") for e in events[:events.index("import numpy")])


def test_the_datasets_reader_does_not_import_torch_in_the_fwe_process(hubsim_server, tmp_path):
    """torch is installed, and `datasets` imports it for every streaming dataset it builds unless USE_TORCH says no;
    the `fwe` process only iterates the rows, so a `--hub-reader datasets` start never imports it (seconds of start
    for nothing) and still reads its batch."""
    pytest.importorskip("torch")
    run = HubRun(hubsim_server, tmp_path / "hub")
    result, events = fwe_process(run, run.new_home(), tmp_path, *SMOKE, "--hub-reader", "datasets", "--tokenizer",
                                 "byte")
    run.close()
    assert result["ok"] is True and result["source"]["reader"] == "datasets"
    assert "import torch" not in events


def loader_config(**overrides):
    return resolve_config(env={}, **{**dict(source="hub", hub_reader="native", tokenizer="gpt2", seq_len=256,
                                            batch_size=2), **overrides})


def first_batch(config) -> np.ndarray:
    with FineWebLoader(config) as loader:
        return np.array(loader.next_batch())


def test_a_listing_started_early_is_taken_over_once_and_only_by_the_same_stream(hub_env):
    """Warm, in this process: start_early sends the HEAD and the next loader's source takes its listing over (one
    request for both, the same batch); the loader after it resolves its own (one more HEAD); a loader of another
    cache setting (--no-cache) does not take one started for the cached stream: it lists from the Hub itself."""
    config = loader_config()
    cold = first_batch(config)
    hub_env.new_log("early")
    HubNative.start_early(config.source, config.read_options())
    assert np.array_equal(first_batch(config), cold)
    assert [r["method"] for r in hub_env.requests()] == ["HEAD"]
    hub_env.new_log("after")
    first_batch(config)
    assert [r["method"] for r in hub_env.requests()] == ["HEAD"]
    hub_env.new_log("other")
    HubNative.start_early(config.source, config.read_options())
    assert np.array_equal(first_batch(loader_config(hub_cache=False)), cold)
    assert any("/revision/" in r["path"] for r in hub_env.requests())


def test_a_cold_listing_reads_the_first_footer_beside_the_sizes_and_the_reader_finds_it(hub_env):
    """Cold: the first file's footer (a suffix range) is read while the listing's paths-info request is still
    unanswered (the server holds it until released; the client then sends it again), and the reader takes the footer
    from the head cache: the file's reads are that footer and then its first row group."""
    hub_env.set_faults(stall_match="paths-info")
    with FineWebLoader(loader_config()) as loader:  # its producer starts the listing at once
        footer = wait_for(hub_env, lambda r: r["range"] == f"bytes=-{FOOTER_PROBE}" and r["status"] == 206)
        stalled = [r for r in hub_env.requests() if "/paths-info/" in r["path"]]
        hub_env.set_faults()  # paths-info answers from now on
        loader.next_batch()
        head = loader.stats()["source"]["head_cache"]
    assert all(r["fault"] == "stall" for r in stalled) and head["hits"] >= 1  # not answered (perhaps not yet sent)
    reads = [r["range"] for r in hub_env.requests() if r["path"] == footer["path"]]
    assert len(reads) == 2 and reads[1].startswith("bytes=4-")


def wait_for(hub, matches, limit_s: float = 60.0) -> dict:
    """The first logged request that `matches`, waited for (polling the log) up to `limit_s`."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = next((r for r in hub.requests() if matches(r)), None)
        if found is not None:
            return found
        time.sleep(0.01)
    raise AssertionError(f"no such request within {limit_s:g} s: {hub.requests()}")

"""The unmodified huggingface_hub and tokenizers clients against the test Hub (listings, downloads, the
agent-harness registry), the seal that keeps clients on 127.0.0.1, and the `python -m tests.hubsim` CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import orjson
import pytest

from tests.hubsim.__main__ import main as hubsim_main
from tests.hubsim.clientenv import REPO_ROOT
from tests.hubsim.requestlog import read_log

LISTING_SCRIPT = r"""
import json
from huggingface_hub import HfApi, hf_hub_download
from tokenizers import Tokenizer
api = HfApi()
out = {"sha": api.dataset_info("HuggingFaceFW/fineweb-edu").sha,
       "dataset_tree": sorted(e.path for e in api.list_repo_tree("HuggingFaceFW/fineweb-edu", repo_type="dataset",
                                                                  recursive=True)),
       "model_tree": sorted(e.path for e in api.list_repo_tree("openai-community/gpt2"))}
out["hello"] = Tokenizer.from_file(hf_hub_download("openai-community/gpt2", "tokenizer.json")).encode("Hello world").ids
out["hello_from_pretrained"] = Tokenizer.from_pretrained("openai-community/gpt2").encode("Hello world").ids
print(json.dumps(out))
"""

# Cold, telemetry on (so huggingface_hub fetches the agent-harness registry), in order.
LISTING_ENDPOINTS = [
    "GET /api/agent-harnesses",
    "GET /api/datasets/{repo}",
    "GET /api/datasets/{repo}/tree/main?recursive=true&expand=false",
    "GET /api/models/{repo}/tree/main?recursive=false&expand=false",
    "HEAD /{repo}/resolve/main/tokenizer.json",
    "GET /{repo}/resolve/main/tokenizer.json",
    "HEAD /{repo}/resolve/main/tokenizer.json",  # Tokenizer.from_pretrained: etag check, then the cached file
]

SEAL_SCRIPT = r"""
import json, socket, urllib.request, os
out = {}
for name, attempt in [("connect", lambda: socket.socket().connect(("10.255.255.1", 80))),
                      ("resolve", lambda: socket.getaddrinfo("huggingface.co", 443))]:
    try:
        attempt()
        out[name] = "allowed"
    except PermissionError as exc:
        out[name] = "refused"
out["local"] = urllib.request.urlopen(os.environ["HF_ENDPOINT"] + "/api/agent-harnesses").status
import datasets.config
out["use_parquet_export"] = datasets.config.USE_PARQUET_EXPORT
print(json.dumps(out))
"""


def run_python(code: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=timeout,
                          cwd=REPO_ROOT)


def test_listing_download_and_agent_registry_endpoints_are_pinned(hub):
    """Cold: repo info, tree listings, tokenizer download (huggingface_hub and tokenizers.from_pretrained)
    call exactly LISTING_ENDPOINTS and give the right answers; a second, warm process neither refetches
    the agent registry (cached in HF_HOME for a day) nor the tokenizer."""
    home = hub.new_home()
    env = dict(hub.env(home), HF_HUB_DISABLE_TELEMETRY="0")
    proc = run_python(LISTING_SCRIPT, env)
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    assert [r["endpoint"] for r in hub.requests()] == LISTING_ENDPOINTS
    assert out["dataset_tree"] == ["README.md", "sample", "sample/10BT", "sample/10BT/000_00000.parquet",
                                   "sample/10BT/001_00000.parquet", "scored", "scored/000_00000.parquet",
                                   "scored/001_00000.parquet"]
    assert out["model_tree"] == ["README.md", "tokenizer.json"]
    assert out["hello"] == out["hello_from_pretrained"] == [15496, 995]
    assert (home / ".agent_harnesses.json").exists()
    hub.new_log("warm")
    assert run_python(LISTING_SCRIPT, env).returncode == 0
    warm = [r["endpoint"] for r in hub.requests()]
    assert "GET /api/agent-harnesses" not in warm and "GET /{repo}/resolve/main/tokenizer.json" not in warm
    assert hub.violations() == []


def test_sealed_clients_cannot_leave_localhost(hub):
    """The sealed sitecustomize refuses a connect to an internet address and a DNS lookup (and records
    both), lets 127.0.0.1 through, and switches datasets' parquet-export lookup off."""
    proc = run_python(SEAL_SCRIPT, hub.env(hub.new_home()))
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    assert out == {"connect": "refused", "resolve": "refused", "local": 200, "use_parquet_export": False}
    assert [v["event"] for v in hub.violations()] == ["socket.connect", "socket.getaddrinfo"]


def test_cli_help_and_build(tmp_path, capsys):
    """`python -m tests.hubsim --help` teaches both commands; `build` writes repos and prints the manifest;
    `serve` on a root without repos exits 2 saying to build first. In-process (`main(argv)`): none of this
    is a process's behaviour, and the CLI imports no Hub client."""
    for argv in (["--help"], ["serve", "--help"]):
        with pytest.raises(SystemExit) as exited:
            hubsim_main(argv)
        assert exited.value.code == 0
    top, serve_help = capsys.readouterr().out.split("usage: python -m tests.hubsim serve", 1)
    assert "build" in top and "serve" in top
    for flag in ("--rtt-ms", "--fail", "--retry-after", "--drop-after-bytes", "--stall-match", "--log"):
        assert flag in serve_help
    assert hubsim_main(["build", "--root", str(tmp_path), "--mb", "0.2", "--shards", "1", "--row-group-rows",
                        "100"]) == 0
    built = capsys.readouterr()
    manifest = orjson.loads(built.out)
    assert manifest["shards"][0]["path"] == "sample/10BT/000_00000.parquet" and manifest["rows"] >= 100
    assert "000_00000.parquet" in built.err  # progress
    assert hubsim_main(["serve", "--root", str(tmp_path / "nope")]) == 2
    assert "build them first" in capsys.readouterr().err


def test_cli_serve_prints_endpoint_injects_faults_and_stops(hubsim_root, tmp_path):
    """`serve --port 0 --fail 1 --log F` prints `export HF_ENDPOINT=...` first, fails one request, logs
    both, prints them on stderr and stops cleanly on SIGTERM."""
    log = tmp_path / "requests.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.hubsim", "serve", "--root", str(hubsim_root), "--port", "0",
                             "--fail", "1", "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=REPO_ROOT)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("export HF_ENDPOINT=http://127.0.0.1:")
        endpoint = line.split("=", 1)[1]
        statuses = []
        for _ in range(2):
            try:
                statuses.append(urllib.request.urlopen(endpoint + "/api/agent-harnesses", timeout=10).status)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
        assert statuses == [503, 200]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    # stop() logs every answer before the process ends; read_log orders by arrival (seq)
    records = read_log(log)
    assert [(r["seq"], r["status"], r["fault"]) for r in records] == [(1, 503, "fail"), (2, 200, None)]
    assert "[fail]" in err and "stopped after 2 requests" in err


def test_bench_writes_cold_and_warm_records(hubsim_root, tmp_path, capsys):
    """`bench --rtt-ms 0` runs cold then warm smoke against its own server and writes both records, each
    pairing first_batch_s with the server's request count (warm fewer), and exits 0. The bench itself runs
    in-process (`main(argv)`; its smoke runs are sealed subprocesses, as always)."""
    out = tmp_path / "bench.json"
    code = hubsim_main(["bench", "--root", str(hubsim_root), "--rtt-ms", "0", "--batch", "1", "--seq-len", "256",
                        "--batches", "2", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == str(out)
    report = orjson.loads(out.read_bytes())
    cold, warm = report["runs"]
    assert (cold["cache"], warm["cache"]) == ("cold", "warm") and cold["ok"] and warm["ok"]
    assert cold["first_batch_s"] > 0 and warm["first_batch_s"] > 0
    assert warm["requests"] < cold["requests"] == len(cold["requests_detail"])
    assert report["sealed_violations"] == [] and report["repos"]["config"] == "sample-10BT"

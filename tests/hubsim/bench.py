"""Cold and warm `fwe smoke --source hub` against the test Hub under added round-trip times; writes JSON.

    python -m tests.hubsim bench --root /tmp/hub --rtt-ms 0,50,200 --out artifacts/hubsim/rtt.json

For each RTT: a fresh HF_HOME (cold run), then the same HF_HOME again (warm run). Each record pairs what
smoke measured (first_batch_s, ok) with what the server saw (requests, connections, body bytes), so
first_batch_s can be read as "round trips x RTT + everything else". Figures, not pass/fail: compare
runs made on the same machine only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from contextlib import contextmanager
from typing import Iterator

import orjson

from fwe_cli.hostinfo import host_facts
from tests.hubsim.clientenv import REPO_ROOT, client_env
from tests.hubsim.faults import Faults
from tests.hubsim.proxy import RttProxy
from tests.hubsim.server import HubServer

PARQUET_RESOLVES = r"/resolve/.*\.parquet"  # what the Hub redirects to its CDN (the data files, in LFS)


@contextmanager
def redirecting_cdn(root, hub: HubServer, ttl_s: float | None, rtt_s: float = 0.0,
                    handshake_rtts: int = 2) -> Iterator[HubServer | None]:
    """With `ttl_s`: a second server on the same repos (behind an RTT proxy of its own when `rtt_s`: another
    host:port either way), `hub` redirecting its parquet resolves there with signed URLs valid `ttl_s`
    (tests/hubsim/cdn.py), as the real Hub sends its files to its CDN; yields that server. Else None."""
    if ttl_s is None:
        yield None
        return
    with HubServer(root) as cdn:
        proxy = RttProxy(("127.0.0.1", cdn.port), rtt_s, handshake_rtts).start() if rtt_s else None
        try:
            hub.set_faults(Faults(redirect_match=PARQUET_RESOLVES, redirect_to=proxy.url if proxy else cdn.url,
                                  sign_ttl_s=ttl_s))
            yield cdn
        finally:
            hub.set_faults()
            if proxy is not None:
                proxy.stop()


def sealed_run(args: list[str], endpoint: str, home: str | os.PathLike, workdir: Path, timeout: float,
               cwd: str | os.PathLike = REPO_ROOT) -> tuple[subprocess.CompletedProcess, float]:
    """Run `args` as a sealed client process (tests/hubsim/clientenv.py: HF_ENDPOINT=`endpoint`, HF_HOME=`home`,
    violations to workdir/violations.jsonl) from the repository root (or `cwd`: another checkout's fwe_cli); (the
    finished process, wall seconds from spawn to exit)."""
    env = dict(os.environ)
    env.update(client_env(endpoint, home, Path(workdir) / "violations.jsonl"))
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    return proc, time.monotonic() - started


def request_summary(records: list[dict]) -> dict:
    """What the server saw in one run's request log: requests, connections, body bytes, span, request list, and how
    many of them were resolves (requests to the Hub's `/resolve/`, which it limits per 5 minutes)."""
    logged_at = [r["t"] for r in records]
    return {"requests": len(records), "connections": len({r["conn"] for r in records}),
            "resolves": sum(1 for r in records if r.get("kind") == "resolve"),
            "body_bytes": sum(r["bytes"] for r in records),
            "server_span_s": round(max(logged_at) - min(logged_at), 3) if records else None,
            "requests_detail": [r["endpoint"] + (f" {r['range']}" if r["range"] else "") for r in records]}


def _smoke(endpoint: str, home: Path, workdir: Path, smoke_args: list[str], timeout: float) -> tuple[dict | None, float]:
    args = [sys.executable, "-m", "fwe_cli", "smoke", "--source", "hub", "--json", "--timeout", f"{timeout:g}",
            "--artifacts-dir", str(workdir / "artifacts"), *smoke_args]
    proc, wall = sealed_run(args, endpoint, home, workdir, timeout + 60)
    return (orjson.loads(proc.stdout) if proc.stdout.strip() else None), wall


def run_bench(root: str, rtts_ms: list[float], smoke_args: list[str], timeout: float = 120.0,
              handshake_rtts: int = 2, progress: Callable[[str], None] = lambda line: None) -> dict:
    """Cold + warm smoke per RTT; returns {"runs": [...], "host": ..., ...}."""
    runs = []
    with HubServer(root) as hub, tempfile.TemporaryDirectory(prefix="hubsim-bench-") as tmp:
        workdir = Path(tmp)
        for rtt_ms in rtts_ms:
            home = workdir / f"hf_home_rtt{rtt_ms:g}"
            home.mkdir()
            proxy = RttProxy(("127.0.0.1", hub.port), rtt_ms / 1000, handshake_rtts).start() if rtt_ms else None
            try:
                for cache in ("cold", "warm"):
                    log = hub.new_log()
                    result, wall = _smoke(proxy.url if proxy else hub.url, home, workdir, smoke_args, timeout)
                    hub.wait_idle()
                    served = request_summary(log.records())
                    run = {"rtt_ms": rtt_ms, "handshake_rtts": handshake_rtts if rtt_ms else 0, "cache": cache,
                           "ok": bool(result and result["ok"]),
                           "first_batch_s": result["first_batch_s"] if result else None,
                           "tokens_per_s": result["tokens_per_s"] if result else None,
                           "error": result["error"] if result else "no JSON from fwe smoke",
                           "requests": served["requests"], "connections": served["connections"],
                           "body_bytes": served["body_bytes"], "process_wall_s": round(wall, 3),
                           "server_span_s": served["server_span_s"], "requests_detail": served["requests_detail"]}
                    runs.append(run)
                    progress(f"rtt {rtt_ms:g} ms {cache}: first_batch_s={run['first_batch_s']} "
                             f"requests={run['requests']} connections={run['connections']} ok={run['ok']}")
            finally:
                if proxy is not None:
                    proxy.stop()
        violations = (workdir / "violations.jsonl").read_text() if (workdir / "violations.jsonl").exists() else ""
    manifest_path = Path(root) / "hubsim.json"
    return {"kind": "hubsim_rtt_bench", "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "root": str(root),
            "repos": orjson.loads(manifest_path.read_bytes()) if manifest_path.exists() else None,
            "smoke_args": smoke_args, "runs": runs, "sealed_violations": violations.splitlines(), "host": host_facts()}

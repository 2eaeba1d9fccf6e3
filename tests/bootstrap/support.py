"""Helpers shared by the bootstrap tests: run the command (in this process, or killed in its own), read a manifest,
compare outputs file by file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from tests.helpers import invoke, run_fwe

# Small enough for a test (about 2,400 synthetic documents), large enough for three parts and several chunks.
SYNTH = ("--source", "synthetic", "--seed", "3", "--gb", "0.008", "--file-mb", "3")


def core_run(out: Path, **flags) -> dict:
    """run_bootstrap in this process (no CLI start-up), flags as bootstrap_config takes them."""
    return run_bootstrap(bootstrap_config(out=str(out), **flags))


def cli(*args: str, tmp: Path, env: dict | None = None):
    """`fwe bootstrap ARGS` in this process (CliRunner), artifacts under tmp: exit_code, stdout, stderr."""
    return invoke("bootstrap", *args, "--artifacts-dir", str(tmp / "artifacts"), env=env)


def killed_at(point: str, *args: str, tmp: Path):
    """`fwe bootstrap ARGS` in its own process, killed by SIGKILL at the fault point `point` (FWE_TEST_CRASH_AT):
    a kill -9 needs a process of its own. Returns the CompletedProcess."""
    return run_fwe("bootstrap", *args, "--artifacts-dir", str(tmp / "artifacts"), env={"FWE_TEST_CRASH_AT": point})


def manifest_of(out: Path) -> dict:
    path = Path(str(out) + ".manifest.json") if str(out).endswith(".jsonl") else out / "manifest.json"
    return orjson.loads(path.read_bytes())


def file_hashes(out: Path) -> dict[str, str]:
    """sha256 of every data file of a directory bootstrap, by name, read from disk (not from the manifest)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("part-*.jsonl"))}


def leftovers(out: Path) -> list[str]:
    """Temporary files that must not survive a completed run."""
    return sorted(p.name for p in out.iterdir() if p.name.endswith((".partial", ".tmp")))


def lines_of(out: Path) -> list[bytes]:
    manifest = manifest_of(out)
    base = out.parent if str(out).endswith(".jsonl") else out
    data = b"".join((base / entry["name"]).read_bytes() for entry in manifest["files"])
    return data.splitlines(keepends=True)


def assert_same_output(got: Path, want: Path) -> None:
    """Byte-identical part files (per-file sha256 from disk) and a manifest that lists exactly them."""
    want_hashes = file_hashes(want)
    assert len(want_hashes) >= 2, "reference must have several parts for the comparison to mean something"
    assert file_hashes(got) == want_hashes
    manifest = manifest_of(got)
    assert manifest["complete"] is True
    assert [(f["name"], f["sha256"]) for f in manifest["files"]] == list(want_hashes.items())
    assert manifest["files"] == manifest_of(want)["files"]
    assert leftovers(got) == []


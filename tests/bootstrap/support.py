"""Helpers shared by the bootstrap tests: run the command (in this process, or killed in its own), read a manifest,
compare outputs file by file (tests/output_support.py, shared with the token tests), read the staged lines."""

from __future__ import annotations

from pathlib import Path

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.loader.files.bootstrap_format import Layout
from tests.output_support import ResumableOutput

# Small enough for a test (about 2,400 synthetic documents), large enough for three parts and several chunks.
SYNTH = ("--source", "synthetic", "--seed", "3", "--gb", "0.008", "--file-mb", "3")

BOOTSTRAP_OUTPUT = ResumableOutput("bootstrap", Layout, data_files="part-*.jsonl", min_files=2)
cli, killed_at, killed_then_rerun = BOOTSTRAP_OUTPUT.cli, BOOTSTRAP_OUTPUT.killed_at, BOOTSTRAP_OUTPUT.killed_then_rerun
manifest_of = BOOTSTRAP_OUTPUT.manifest_of
file_hashes, leftovers, assert_same_output = (BOOTSTRAP_OUTPUT.file_hashes, BOOTSTRAP_OUTPUT.leftovers,
                                              BOOTSTRAP_OUTPUT.assert_same_output)


def core_run(out: Path, **flags) -> dict:
    """run_bootstrap in this process (no CLI start-up), flags as bootstrap_config takes them."""
    return run_bootstrap(bootstrap_config(out=str(out), **flags))


def lines_of(out: Path) -> list[bytes]:
    """Every staged line, in the order the manifest lists the parts."""
    manifest = manifest_of(out)
    base = out.parent if str(out).endswith(".jsonl") else out
    data = b"".join((base / entry["name"]).read_bytes() for entry in manifest["files"])
    return data.splitlines(keepends=True)

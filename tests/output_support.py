"""What the tests of fwe's resumable outputs (`fwe bootstrap`, `fwe tokenize`) share: the command run in this process
or in a process of its own (to be killed), its manifest read back, two outputs compared file by file, and the
output's lock held by another process.

    BOOTSTRAP_OUTPUT = ResumableOutput("bootstrap", Layout, data_files="part-*.jsonl", min_files=2)
    BOOTSTRAP_OUTPUT.cli("--source", "synthetic", "--gb", "0.002", "--out", str(out), tmp=tmp_path)
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import orjson

from tests.helpers import fwe_env, invoke, run_fwe

TEMPORARY_SUFFIXES = (".partial", ".tmp", ".lock")  # what no finished run leaves behind

# Holds an output's lock the way a running command does, says so on stdout, and keeps it until stdin closes.
_HOLDER = """
import importlib, sys
from fwe_cli.output.lock import OutputLock
module, name, out = sys.argv[1:]
with OutputLock(getattr(importlib.import_module(module), name).for_out(out)):
    print("locked", flush=True)
    sys.stdin.read()
"""


@dataclass(frozen=True)
class ResumableOutput:
    """One command's output, as its tests see it."""

    command: str
    """The fwe subcommand: 'bootstrap', 'tokenize'."""
    layout: type
    """Its layout class (`for_out(out)`, `kind`): what the product says the output is."""
    data_files: str
    """Glob of the files that hold the output's data, in its directory."""
    min_files: int
    """How many data files a reference needs for a file-by-file comparison to mean something."""

    def cli(self, *args: str, tmp: Path, env: dict | None = None):
        """`fwe COMMAND ARGS` in this process (CliRunner), artifacts under tmp: exit_code, stdout, stderr."""
        return invoke(self.command, *args, "--artifacts-dir", str(tmp / "artifacts"), env=env)

    def run_in_own_process(self, *args: str, tmp: Path, env: dict | None = None):
        """`fwe COMMAND ARGS` in a fresh interpreter (for kill -9, signals, a process's exit): CompletedProcess."""
        return run_fwe(self.command, *args, "--artifacts-dir", str(tmp / "artifacts"), env=env, timeout=300)

    def killed_at(self, point: str, *args: str, tmp: Path, env: dict | None = None):
        """`fwe COMMAND ARGS` in its own process, killed by SIGKILL at the fault point `point` (FWE_TEST_CRASH_AT)."""
        return self.run_in_own_process(*args, tmp=tmp, env={**(env or {}), "FWE_TEST_CRASH_AT": point})

    def killed_then_rerun(self, point: str, out: Path, *args: str, tmp: Path) -> tuple[dict, object]:
        """`fwe COMMAND ARGS` (writing `out`) killed by SIGKILL at the fault point `point`, which must leave an
        incomplete manifest with a resume point, then the same command re-run in this process with --json, which
        must succeed: (the manifest the killed run left, the re-run's result)."""
        killed = self.killed_at(point, *args, tmp=tmp)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        before = self.manifest_of(out)
        assert before["complete"] is False and before["resume"] is not None
        done = self.cli(*args, "--json", tmp=tmp)
        assert done.exit_code == 0, done.stderr
        return before, done

    def manifest_of(self, out: Path) -> dict:
        """The manifest as on disk: OUT/manifest.json, or X.jsonl.manifest.json beside a single-file output X.jsonl."""
        path = Path(f"{out}.manifest.json") if str(out).endswith(".jsonl") else Path(out) / "manifest.json"
        return orjson.loads(path.read_bytes())

    def file_hashes(self, out: Path) -> dict[str, str]:
        """sha256 of every data file of a directory output, by name, read from disk (not from the manifest)."""
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob(self.data_files))}

    def leftovers(self, out: Path) -> list[str]:
        """Temporary files and locks, which must not survive a finished run."""
        return sorted(p.name for p in out.iterdir() if p.name.endswith(TEMPORARY_SUFFIXES))

    def assert_same_output(self, got: Path, want: Path) -> None:
        """Byte-identical data files (sha256 from disk), a complete manifest that lists exactly them with their
        sha256 and the reference's entries and totals, and nothing temporary left."""
        want_hashes = self.file_hashes(want)
        assert len(want_hashes) >= self.min_files, "the reference has too few files for the comparison to mean much"
        assert self.file_hashes(got) == want_hashes
        manifest, reference = self.manifest_of(got), self.manifest_of(want)
        assert manifest["complete"] is True and manifest["resume"] is None
        listed = self.layout.kind.listed
        assert {entry["name"]: entry["sha256"] for entry in listed(manifest)} == want_hashes
        assert listed(manifest) == listed(reference) and manifest["totals"] == reference["totals"]
        assert self.leftovers(got) == []

    @contextmanager
    def lock_held_elsewhere(self, out: Path) -> Iterator[subprocess.Popen]:
        """Another process holding `out`'s lock for the block (it ends when the block does, or when killed)."""
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, self.layout.__module__, self.layout.__name__,
                                   str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=fwe_env())
        try:
            assert holder.stdout.readline() == "locked\n"
            yield holder
        finally:
            holder.stdin.close()
            holder.wait(timeout=60)
            holder.stdout.close()

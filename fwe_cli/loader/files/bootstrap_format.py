"""The bootstrap format: where a bootstrap's files live, what kind of manifest lists them, and how it is verified
(writing, reading, preparing and verifying a manifest is fwe_cli/output's, shared with `fwe tokenize`). Beside its
readers (local_files, files.text, head_tail), for its two writers: `fwe bootstrap` and the loader growing a
bootstrap with its Hub tail (growth).

Two layouts:
- a directory (the default): `manifest.json` plus `part-00000.jsonl`, `part-00001.jsonl`, ...
- a single file `X.jsonl` (when --out ends in .jsonl): the data file plus `X.jsonl.manifest.json` beside it.

A part is written as `<name>.partial` and renamed to `<name>` only once complete and fsynced, so a file under
its final name is always whole. The manifest is the record of truth: `files` lists the finished parts (name,
bytes, lines, sha256) in reading order, `complete` says whether the whole run is done, and while it is not,
`resume` holds the last checkpoint (part, bytes and lines of it that are on disk, source position, counters).
It is replaced atomically (temporary file, fsync, rename, fsync of the directory) at every checkpoint.

Check a bootstrap by hand: `fwe bootstrap --verify --out DIR` (re-hashes every file against the manifest).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import ClassVar

from fwe_cli.loader.files.listing import MANIFEST_NAME, SIDECAR_MANIFEST_SUFFIX, manifest_problem
from fwe_cli.output.kind import OutputKind
from fwe_cli.output.os_errors import on_output
from fwe_cli.output.verify import verify_output

FORMAT = "fwe-bootstrap/1"
PARTIAL_SUFFIX = ".partial"
_PART_RE = re.compile(r"^part-(\d{5,})\.jsonl(\.partial)?$")
DOWNLOAD_DIR = ".fwe-hub-download"
LOCK_NAME = ".fwe-bootstrap.lock"
BOOTSTRAP = OutputKind(format=FORMAT, what="bootstrap", command="fwe bootstrap", shape_problem=manifest_problem,
                       listed=lambda manifest: manifest.get("files", []))


@dataclass(frozen=True)
class Layout:
    """The paths of one bootstrap output (an fwe_cli.output OutputLayout)."""

    kind: ClassVar[OutputKind] = BOOTSTRAP
    out: str
    """The --out argument: a directory, or a file path ending in .jsonl."""
    single: bool
    """True for the single-file layout (one data file, sidecar manifest)."""

    @classmethod
    def for_out(cls, out: str) -> "Layout":
        return cls(out=os.path.abspath(out), single=out.endswith(".jsonl"))

    @property
    def directory(self) -> str:
        return os.path.dirname(self.out) if self.single else self.out

    @property
    def manifest_path(self) -> str:
        return self.out + SIDECAR_MANIFEST_SUFFIX if self.single else os.path.join(self.out, MANIFEST_NAME)

    @property
    def download_dir(self) -> str:
        """Where the native Hub reader keeps parquet files until they are converted (deleted when complete)."""
        return self.out + ".hub-download" if self.single else os.path.join(self.out, DOWNLOAD_DIR)

    @property
    def lock_path(self) -> str:
        """The file a run holds locked while it writes this output (see fwe_cli/output/lock.py)."""
        return self.out + ".lock" if self.single else os.path.join(self.out, LOCK_NAME)

    def part_name(self, index: int) -> str:
        if self.single:
            if index:
                raise ValueError("a single-file bootstrap has exactly one part")
            return os.path.basename(self.out)
        return f"part-{index:05d}.jsonl"

    def part_path(self, index: int) -> str:
        return os.path.join(self.directory, self.part_name(index))

    def partial_path(self, index: int) -> str:
        return self.part_path(index) + PARTIAL_SUFFIX

    def own_files(self) -> list[tuple[str, int | None]]:
        """(path, part index or None for the manifest and its temporary) of every file of ours that exists."""
        found: list[tuple[str, int | None]] = []
        for path in (self.manifest_path, self.manifest_path + ".tmp"):
            if os.path.isfile(path):
                found.append((path, None))
        if self.single:
            for path in (self.out, self.out + PARTIAL_SUFFIX):
                if os.path.isfile(path):
                    found.append((path, 0))
        elif os.path.isdir(self.out):
            with on_output("list", self.out):
                names = sorted(os.listdir(self.out))
            for name in names:
                match = _PART_RE.match(name)
                if match:
                    found.append((os.path.join(self.out, name), int(match.group(1))))
        return found

    def has_foreign_files(self) -> bool:
        """Whether the output directory holds files that are not ours (only meaningful for the directory layout)."""
        if self.single or not os.path.isdir(self.out):
            return False
        ours = {os.path.basename(path) for path, _ in self.own_files()}
        with on_output("list", self.out):
            names = os.listdir(self.out)
        return any(name not in ours and name not in (DOWNLOAD_DIR, LOCK_NAME) for name in names)

    def stale_files(self, manifest: dict) -> list[str]:
        """Part files `manifest` (incomplete) does not stand behind: any after the part its checkpoint is in, and
        a temporary one of an earlier part (listed under its final name)."""
        current = manifest["resume"]["part"]
        return [path for path, index in self.own_files()
                if index is not None and (index > current or (index < current and path.endswith(PARTIAL_SUFFIX)))]


def listed_totals(manifest: dict) -> dict:
    """The manifest's `totals`: bytes, documents (lines) and files of the parts it lists."""
    files = manifest["files"]
    return {"bytes": sum(f["bytes"] for f in files), "documents": sum(f["lines"] for f in files), "files": len(files)}


def verify_bootstrap(out: str) -> dict:
    """Re-hash every file the manifest lists. `ok` means complete and every file matches."""
    return verify_output(Layout.for_out(out), lambda manifest: {
        "files_checked": len(manifest.get("files", [])),
        "bytes": sum(entry["bytes"] for entry in manifest.get("files", [])),
    })

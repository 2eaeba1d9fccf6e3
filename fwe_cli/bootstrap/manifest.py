"""The bootstrap manifest: where a bootstrap's files live, how its manifest is written, and how it is verified.

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
from typing import Callable

import orjson

from fwe_cli.bootstrap.output_errors import on_output
from fwe_cli.errors import OutputError, SourceError, os_error_line
from fwe_cli.loader.sources.local import MANIFEST_NAME, SIDECAR_MANIFEST_SUFFIX, read_manifest
from fwe_cli.loader.sources.local_files import listed_file_problems, manifest_problem

FORMAT = "fwe-bootstrap/1"
PARTIAL_SUFFIX = ".partial"
_PART_RE = re.compile(r"^part-(\d{5,})\.jsonl(\.partial)?$")
DOWNLOAD_DIR = ".fwe-hub-download"
LOCK_NAME = ".fwe-bootstrap.lock"


@dataclass(frozen=True)
class Layout:
    """The paths of one bootstrap output."""

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
        """The file a run holds locked while it writes this output (see fwe_cli/bootstrap/output_lock.py)."""
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


def fsync_dir(directory: str) -> None:
    """Make a rename or new file in `directory` durable (POSIX: the directory entry needs its own fsync)."""
    with on_output("sync directory", directory):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def encode_manifest(manifest: dict) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def write_manifest(layout: Layout, manifest: dict | bytes, before_rename: Callable[[], None] = lambda: None) -> None:
    """Replace the manifest (a dict, or encode_manifest's bytes) atomically and durably.

    `before_rename` is a crash-test hook. One writer at a time: the run holds the output's lock (output_lock.py),
    so the fixed temporary name cannot be written by two processes at once."""
    with on_output("create directory", layout.directory):
        os.makedirs(layout.directory, exist_ok=True)
    tmp = layout.manifest_path + ".tmp"
    data = manifest if isinstance(manifest, bytes) else encode_manifest(manifest)
    with on_output("write", tmp):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    before_rename()
    with on_output("replace", layout.manifest_path):
        os.replace(tmp, layout.manifest_path)
    fsync_dir(layout.directory)


def load_manifest(layout: Layout) -> dict | None:
    """The manifest, None when there is none; OutputError when it cannot be read or is not a bootstrap's."""
    try:
        manifest = read_manifest(layout.manifest_path)  # SourceError, its OSError or JSONDecodeError as cause
    except SourceError as exc:
        cause = exc.__cause__
        if isinstance(cause, FileNotFoundError):
            return None
        if isinstance(cause, orjson.JSONDecodeError):
            raise OutputError(f"{layout.manifest_path} is damaged (not JSON: {cause.msg}); "
                              "pass --force to start over") from cause
        if isinstance(cause, OSError):
            raise OutputError(os_error_line("read", layout.manifest_path, cause)) from None  # the line says it all
        raise OutputError(f"cannot read {layout.manifest_path}: {cause or exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise OutputError(f"{layout.manifest_path} is not an fwe bootstrap manifest (format {FORMAT}); "
                          "choose another --out, or pass --force to replace it")
    problem = manifest_problem(manifest)
    if problem is not None:
        raise OutputError(f"{layout.manifest_path} is damaged ({problem}); pass --force to start over")
    return manifest


def verify_bootstrap(out: str) -> dict:
    """Re-hash every file the manifest lists. `ok` means complete and every file matches."""
    layout = Layout.for_out(out)
    manifest = load_manifest(layout)
    if manifest is None:
        raise OutputError(f"no bootstrap manifest at {layout.manifest_path}")
    problems = listed_file_problems(layout.directory, manifest, rehash=True)
    complete = bool(manifest.get("complete"))
    return {
        "ok": complete and not problems,
        "complete": complete,
        "output": layout.out,
        "manifest_path": layout.manifest_path,
        "files_checked": len(manifest.get("files", [])),
        "bytes": sum(entry["bytes"] for entry in manifest.get("files", [])),
        "problems": problems,
    }

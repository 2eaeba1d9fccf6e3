"""A minimal output kind for testing fwe_cli/output on its own: a directory of `data-N.bin` files and a manifest.json
listing them ({format: "sample/1", complete, files: [{name, bytes, sha256}]})."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fwe_cli.output.kind import OutputKind
from fwe_cli.output.manifest_file import write_manifest

SAMPLE = OutputKind(format="sample/1", what="sample output", command="fwe sample",
                    shape_problem=lambda manifest: None if isinstance(manifest.get("files"), list) else "no file list",
                    listed=lambda manifest: manifest["files"])


@dataclass(frozen=True)
class SampleLayout:
    kind: ClassVar[OutputKind] = SAMPLE
    out: str

    @classmethod
    def for_out(cls, out) -> "SampleLayout":
        return cls(os.path.abspath(out))

    @property
    def directory(self) -> str:
        return self.out

    @property
    def manifest_path(self) -> str:
        return os.path.join(self.out, "manifest.json")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.out, ".sample.lock")

    def own_files(self) -> list[tuple[str, int | None]]:
        names = sorted(os.listdir(self.out)) if os.path.isdir(self.out) else []
        return [(os.path.join(self.out, n), None if n.startswith("manifest.json") else int(n[5:].split(".")[0]))
                for n in names if n.startswith(("manifest.json", "data-"))]

    def has_foreign_files(self) -> bool:
        ours = {os.path.basename(path) for path, _ in self.own_files()} | {".sample.lock"}
        return os.path.isdir(self.out) and any(n not in ours for n in os.listdir(self.out))

    def stale_files(self, manifest: dict) -> list[str]:
        listed = {entry["name"] for entry in manifest["files"]}
        return [p for p, n in self.own_files() if n is not None and os.path.basename(p) not in listed]


def write_sample(out: Path, sizes: list[int], complete: bool = True, **fields) -> SampleLayout:
    """A sample output with one data file of each size (bytes 0, 1, 2, ...), listed in a manifest written by
    write_manifest."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for number, size in enumerate(sizes):
        data = bytes(i % 251 for i in range(size))
        (out / f"data-{number}.bin").write_bytes(data)
        files.append({"name": f"data-{number}.bin", "bytes": size, "sha256": hashlib.sha256(data).hexdigest()})
    layout = SampleLayout.for_out(out)
    write_manifest(layout, {"format": SAMPLE.format, "complete": complete, "files": files, **fields})
    return layout

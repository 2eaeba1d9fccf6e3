"""An output's files checked against its manifest: present, of the listed size, and (re-hashed) of the listed sha256.

`listed_file_problems` is the one comparison of listed files with the disk: the loader's reading of a bootstrap or a
token directory, a resume (sizes only) and `--verify` (sizes and sha256) all use it; `verify_output` is
`fwe bootstrap --verify` and `fwe tokenize --verify`.
"""

from __future__ import annotations

import hashlib
import os
from typing import Callable

from fwe_cli.errors import OutputError, os_error_line
from fwe_cli.output.kind import OutputLayout
from fwe_cli.output.manifest_file import load_manifest

HASH_BLOCK = 1 << 20


def hash_into(digest, path: str, limit: int | None = None) -> int:
    """Feed the file's bytes (its first `limit` bytes) to `digest` (a hashlib object); returns how many it fed,
    fewer than `limit` when the file is shorter."""
    fed = 0
    with open(path, "rb", buffering=0) as handle:
        while limit is None or fed < limit:
            block = handle.read(HASH_BLOCK if limit is None else min(HASH_BLOCK, limit - fed))
            if not block:
                break
            digest.update(block)
            fed += len(block)
    return fed


def sha256_file(path: str, limit: int | None = None) -> str:
    """sha256 of the file (or of its first `limit` bytes)."""
    digest = hashlib.sha256()
    hash_into(digest, path, limit)
    return digest.hexdigest()


def listed_file_problems(directory: str, manifest: dict, rehash: bool) -> list[dict]:
    """One {name, problem} per file a manifest lists in `files` ({name, bytes, sha256}, names relative to
    `directory`) that is missing, of the wrong size or (with rehash) the wrong sha256."""
    problems = []
    for entry in manifest.get("files", []):
        path = os.path.join(directory, entry["name"])
        try:
            size = os.path.getsize(path)
        except OSError:
            problems.append({"name": entry["name"], "problem": "missing"})
            continue
        if size != entry["bytes"]:
            problems.append({"name": entry["name"], "problem": f"{size} bytes, manifest says {entry['bytes']}"})
        elif rehash:
            try:
                differs = sha256_file(path) != entry["sha256"]
            except OSError as exc:  # unreadable, or a directory under the file's name
                problems.append({"name": entry["name"], "problem": os_error_line("read", path, exc)})
                continue
            if differs:
                problems.append({"name": entry["name"], "problem": "sha256 differs from the manifest"})
    return problems


def verify_output(layout: OutputLayout, counts: Callable[[dict], dict]) -> dict:
    """Re-hash every file the manifest lists: {ok, complete, output, manifest_path, **counts(manifest), problems};
    `ok` means complete and every file matches. OutputError when there is no manifest or it cannot be trusted."""
    manifest = load_manifest(layout)
    if manifest is None:
        raise OutputError(f"no {layout.kind.what} manifest at {layout.manifest_path}")
    problems = listed_file_problems(layout.directory, {"files": layout.kind.listed(manifest)}, rehash=True)
    complete = bool(manifest.get("complete"))
    return {"ok": complete and not problems, "complete": complete, "output": layout.out,
            "manifest_path": layout.manifest_path, **counts(manifest), "problems": problems}

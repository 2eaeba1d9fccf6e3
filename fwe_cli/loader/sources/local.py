"""Local files, read directly (no `datasets`): JSONL via orjson, TXT, parquet by row-group batches.

Formats, by extension:
- `.jsonl`, `.json`, `.jsonl.gz`, `.json.gz`: one JSON object per line with a string field `text`.
- `.txt`: one document per line (empty lines skipped).
- `.parquet`: the `text` column, read in row-group batches.

A path may be a file, a directory (all supported files below it, sorted by relative path), a glob, or a
bootstrap directory (has `manifest.json`; its parts are read in manifest order, and an incomplete
manifest is refused unless `allow_partial`). A single-file bootstrap `X.jsonl` appears under its name
only when complete; while it is being written, `X.jsonl.manifest.json` says so.

The `scan_*` functions are the readers themselves: they start at a saved position and report where
each record ends, so `fwe bootstrap` can resume; the `iter_*` functions wrap them as Documents.
"""

from __future__ import annotations

import glob
import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterator

import orjson

from fwe_cli.loader.documents import Document
from fwe_cli.errors import SourceError

JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
SUPPORTED_SUFFIXES = JSONL_SUFFIXES + (".txt", ".parquet")
MANIFEST_NAME = "manifest.json"
SIDECAR_MANIFEST_SUFFIX = ".manifest.json"  # single-file bootstrap: X.jsonl + X.jsonl.manifest.json
MAX_REPORTED_BAD = 20


@dataclass
class BadRecords:
    """Malformed records met so far: a count and the first few `file:line: reason` strings."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, where: str, reason: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_REPORTED_BAD:
            self.examples.append(f"{where}: {reason}")

    def reject(self, where: str, reason: str, strict: bool) -> None:
        """A malformed record at `where`: counted (skip mode), or with `strict` a SourceError naming it."""
        if strict:
            raise SourceError(f"{where}: {reason} (use --bad-records skip to count and skip it)")
        self.add(where, reason)

    def to_dict(self) -> dict:
        return {"count": self.count, "examples": list(self.examples)}


def bad_text_reason(text: object) -> str:
    """Why a record's `text` value, present but not a string, is unusable (parquet and Hub rows)."""
    return "'text' is null" if text is None else f"'text' is {type(text).__name__}, not a string"


def _supported(path: str) -> bool:
    return path.endswith(SUPPORTED_SUFFIXES) and not path.endswith(SIDECAR_MANIFEST_SUFFIX)


def read_manifest(path: str | os.PathLike) -> dict:
    """A bootstrap manifest's JSON, parsed; `path` is the manifest file itself or a bootstrap directory.

    The manifest's file name: `manifest.json` inside a bootstrap directory (MANIFEST_NAME), or `X.jsonl.manifest.json`
    beside a single-file bootstrap `X.jsonl` (SIDECAR_MANIFEST_SUFFIX); a path ending in `manifest.json` is read as
    the file, anything else as the directory. Raises SourceError naming the file when it cannot be read (a missing
    one included) or is not JSON, with the OSError or JSONDecodeError as its cause. The caller checks that the JSON
    is a manifest it knows.
    """
    file = os.fspath(path)
    if not file.endswith(MANIFEST_NAME):
        file = os.path.join(file, MANIFEST_NAME)
    try:
        return orjson.loads(Path(file).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SourceError(f"cannot read bootstrap manifest {file}: {exc}") from exc


def resolve_files(path: str, allow_partial: bool = False) -> list[str]:
    """The files a local path names, in the order they are read. Raises SourceError when there are none."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, MANIFEST_NAME)):
            manifest = read_manifest(path)
            if not isinstance(manifest, dict):
                raise SourceError(f"{os.path.join(path, MANIFEST_NAME)} is not a bootstrap manifest (not an object)")
            if not manifest.get("complete") and not allow_partial:
                raise SourceError(
                    f"bootstrap at {path} is incomplete (manifest says complete=false): finish it by re-running "
                    "`fwe bootstrap` with the same arguments, or pass --allow-partial to read what is there"
                )
            files = [os.path.join(path, entry["name"]) for entry in manifest.get("files", [])]
            missing = [f for f in files if not os.path.isfile(f)]
            if missing:
                raise SourceError(f"bootstrap at {path} lists files that are missing: {', '.join(missing[:3])}")
        else:
            files = sorted(
                os.path.join(root, name)
                for root, _dirs, names in os.walk(path)
                for name in names
                if _supported(name)
            )
    elif os.path.exists(path):  # a regular file, or a FIFO/device a user streams through
        if not _supported(path):
            raise SourceError(f"{path}: unsupported file type (expected one of {', '.join(SUPPORTED_SUFFIXES)})")
        files = [path]
    else:
        files = sorted(f for f in glob.glob(path, recursive=True) if not os.path.isdir(f) and _supported(f))
        if not files and not glob.has_magic(path):
            if os.path.isfile(path + SIDECAR_MANIFEST_SUFFIX):
                raise SourceError(
                    f"bootstrap to {path} is incomplete ({path + SIDECAR_MANIFEST_SUFFIX} says complete=false; a "
                    "single-file bootstrap appears under its name only when done): finish it by re-running "
                    "`fwe bootstrap` with the same arguments"
                )
            raise SourceError(f"{path}: no such file or directory")
    if not files:
        raise SourceError(f"{path}: no {'/'.join(SUPPORTED_SUFFIXES)} files found")
    return files


def _open_binary(path: str) -> BinaryIO:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=1 << 20)


def numbered_lines(handle, start: int, lineno: int) -> Iterator[tuple[bytes, int, int]]:
    """(line, its number, the byte offset just after it) for each line from byte `start` (just after line `lineno`):
    the positions a resume point records."""
    if start:
        handle.seek(start)
    offset = start
    for line in handle:
        lineno += 1
        offset += len(line)
        yield line, lineno, offset


def scan_jsonl(
    path: str, bad: BadRecords, strict: bool, start: int = 0, lineno: int = 0
) -> Iterator[tuple[dict, str, int, int, bytes]]:
    """(record, text, lineno, end_offset, line) for each good record, from byte `start` (just after line `lineno`)."""
    with _open_binary(path) as handle:
        for line, lineno, offset in numbered_lines(handle, start, lineno):
            if line.isspace():  # not strip(), which copies every line: visible in a profile of a local bootstrap
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                reason = f"bad JSON ({exc.msg})"
            else:
                text = record.get("text") if isinstance(record, dict) else None
                if isinstance(text, str):
                    yield record, text, lineno, offset, line
                    continue
                reason = "not a JSON object" if not isinstance(record, dict) else (
                    "missing field 'text'" if "text" not in record else f"'text' is {type(text).__name__}, not a string"
                )
            bad.reject(f"{path}:{lineno}", reason, strict)


def iter_jsonl(path: str, bad: BadRecords, strict: bool) -> Iterator[Document]:
    # The loader's path: wrapping scan_jsonl (one reader for the loader and bootstrap) costs nothing measurable
    # against a loop of its own (runbooks/throughput.md).
    for record, text, lineno, _end, _line in scan_jsonl(path, bad, strict):
        rid = record.get("id")
        yield Document(text=text, id=rid if isinstance(rid, str) else f"{path}:{lineno}")


def scan_txt(path: str, start: int = 0, lineno: int = 0) -> Iterator[tuple[str, int, int]]:
    """(text, lineno, end_offset) for each non-blank line, from byte `start` (just after line `lineno`)."""
    with open(path, "rb", buffering=1 << 20) as handle:
        for line, lineno, offset in numbered_lines(handle, start, lineno):
            text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
            if text.strip():
                yield text, lineno, offset


def iter_txt(path: str) -> Iterator[Document]:
    for text, lineno, _end in scan_txt(path):
        yield Document(text=text, id=f"{path}:{lineno}")


def scan_parquet(
    path: str, bad: BadRecords, strict: bool, all_columns: bool = False, start_row: int = 0
) -> Iterator[tuple[dict, int]]:
    """(record, row number from 1) for each row with a string `text`, after the first `start_row` rows.

    Reads only `text` and `id` unless `all_columns`; whole row groups before `start_row` are not read.
    """
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise SourceError(f"{path}: not a readable parquet file ({exc})") from exc
    names = parquet.schema_arrow.names
    if "text" not in names:
        raise SourceError(f"{path}: parquet file has no 'text' column (columns: {', '.join(names)})")
    columns = None if all_columns else [c for c in ("text", "id") if c in names]
    first, row = 0, 0
    while first < parquet.num_row_groups and row + parquet.metadata.row_group(first).num_rows <= start_row:
        row += parquet.metadata.row_group(first).num_rows
        first += 1
    groups = list(range(first, parquet.num_row_groups))
    if not groups:
        return
    for batch in parquet.iter_batches(batch_size=1000, columns=columns, row_groups=groups):
        for record in batch.to_pylist():
            row += 1
            if row <= start_row:
                continue
            text = record.get("text")
            if isinstance(text, str):
                yield record, row
                continue
            bad.reject(f"{path}:row{row}", bad_text_reason(text), strict)


def iter_parquet(path: str, bad: BadRecords, strict: bool) -> Iterator[Document]:
    for record, row in scan_parquet(path, bad, strict):
        rid = record.get("id")
        yield Document(text=record["text"], id=rid if isinstance(rid, str) else f"{path}:row{row}")


def iter_local(files: list[str], bad: BadRecords, strict: bool) -> Iterator[Document]:
    """Every document of `files`, in order (unsharded)."""
    for path in files:
        if path.endswith(JSONL_SUFFIXES):
            yield from iter_jsonl(path, bad, strict)
        elif path.endswith(".txt"):
            yield from iter_txt(path)
        else:
            yield from iter_parquet(path, bad, strict)

"""Local files, read directly (no `datasets`): JSONL via orjson, TXT, parquet by row-group batches.

Formats, by extension:
- `.jsonl`, `.json`, `.jsonl.gz`, `.json.gz`: one JSON object per line with a string field `text`.
- `.txt`: one document per line (empty lines skipped).
- `.parquet`: the `text` column, read in row-group batches.

A row filter (sources.where) is applied per record to JSONL (a record lacking a column it names is an error naming
the line: JSONL has no schema, and a typo must not empty the stream silently) and to parquet, whose row groups that
their statistics rule out are not read; TXT has no fields to filter (the source refuses the filter).

Which files a path names (file, directory, glob, bootstrap), and the checks made before any is opened: see
files.listing. A file that cannot be read to its end (truncated or corrupt compressed data, an I/O error) is an
error naming it and where reading stopped, never a stream that silently ends early.

The `scan_*` functions are the readers themselves: they start at a saved position and report where
each record ends, so `fwe bootstrap` can resume; files.read reads a loader's pieces with them.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import orjson

from fwe_cli.errors import FweError, InputError, SourceError, os_error_line
from fwe_cli.loader.files.listing import (  # noqa: F401  (the names callers import from here)
    JSONL_SUFFIXES,
    MANIFEST_NAME,
    SIDECAR_MANIFEST_SUFFIX,
    SUPPORTED_SUFFIXES,
    read_manifest,
    resolve_files,
)
from fwe_cli.loader.remote.object_store import is_url
from fwe_cli.loader.sources.bad_records import BadRecords, bad_text_reason
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.where import Filtered, Where


def _open_binary(path: str, start: int = 0, until: int | None = None) -> BinaryIO:
    """The file (gunzipped if .gz) to read lines of; an object store's URL read by range reads from `start`, fetched
    ahead up to `until` (files.objects)."""
    if is_url(path):
        from fwe_cli.loader.files.objects import open_object

        raw = open_object(path, 0 if path.endswith(".gz") else start, None if path.endswith(".gz") else until)
        return gzip.open(raw, "rb") if path.endswith(".gz") else raw
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=1 << 20)


def open_parquet(path: str):
    """A parquet file opened (its footer read): a local one, or an object store's read by range reads
    (files.object_parquet); SourceError naming it when it is not one."""
    if is_url(path):
        from fwe_cli.loader.files.object_parquet import RemoteParquet

        return RemoteParquet(path)
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise SourceError(f"{path}: not a readable parquet file ({exc})") from exc


def file_size(path: str) -> int:
    """A file's bytes: os.stat, or what an object store's listing saw."""
    if is_url(path):
        from fwe_cli.loader.files.objects import known

        return known(path)[1].size
    return os.path.getsize(path)


# What reading a compressed file that ends early or holds garbage raises: EOFError ("Compressed file ended before the
# end-of-stream marker was reached"), which Click would report as a bare "Aborted.", or BadGzipFile / zlib.error.
_DECOMPRESS_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)
UTF8_BOM = b"\xef\xbb\xbf"


def read_lines(path: str, start: int = 0, lineno: int = 0, end: int | None = None,
               align: bool = False) -> Iterator[tuple[bytes, int, int, int]]:
    """(line, its number, the byte offset just after it, the offset it begins at) for each line of `path` (gunzipped
    if .gz) from byte `start` (just after line `lineno`): the positions a resume point records. `end`: only the lines
    that begin before it. `align`: `start` may be inside a line, which then belongs to whoever reads from its
    beginning: reading starts at the next line, and line numbers are unknown (0).

    A read that fails raises InputError (damaged compressed data) or SourceError (any other OSError), naming the file
    and the last line read whole."""
    try:
        handle = _open_binary(path, max(start - 1, 0), end)
    except OSError as exc:
        raise SourceError(os_error_line("open", path, exc)) from exc
    offset = start
    numbered = not (align and start)
    lineno = lineno if numbered else 0
    with handle:
        try:
            if start and align:  # the line holding byte start - 1 began before `start`: it is not this reader's
                handle.seek(start - 1)
                offset = start - 1 + len(handle.readline())
            elif start:
                handle.seek(start)
            for line in handle:
                begin = offset
                if end is not None and begin >= end:
                    return
                lineno += numbered
                offset += len(line)
                if begin == 0 and line.startswith(UTF8_BOM):  # editors on Windows start files with one
                    line = line[len(UTF8_BOM):]
                yield line, lineno, offset, begin
        except (*_DECOMPRESS_ERRORS, OSError) as exc:
            raise _read_failure(path, handle, exc, lineno, offset) from exc


def place(path: str, lineno: int, begin: int) -> str:
    """A line's name: `path:N`, or `path:byteB` where its number is unknown (a reader that began mid-file)."""
    return f"{path}:{lineno}" if lineno else f"{path}:byte{begin}"


def _read_failure(path: str, handle: BinaryIO, exc: BaseException, lineno: int, offset: int) -> FweError:
    if not isinstance(exc, _DECOMPRESS_ERRORS):
        return SourceError(os_error_line("read", path, exc) + f" (after line {lineno}, byte {offset})")
    raw = getattr(handle, "fileobj", None)  # GzipFile's compressed file: how far into it the reader got
    try:
        compressed = f", {raw.tell()} of {os.fstat(raw.fileno()).st_size} compressed bytes read" if raw else ""
    except (OSError, ValueError):
        compressed = ""
    reason = str(exc) or type(exc).__name__
    return InputError(f"{path} is truncated or corrupt: reading stopped after line {lineno} (byte {offset} of the "
                      f"decompressed text{compressed}): {reason}; re-create the file (a bootstrap part: "
                      "`fwe bootstrap --verify --out DIR` lists the damaged parts)")


def scan_jsonl(
    path: str, bad: BadRecords, strict: bool, start: int = 0, lineno: int = 0, end: int | None = None,
    align: bool = False,
) -> Iterator[tuple[dict, str, int, int, bytes, int]]:
    """(record, text, lineno, end_offset, line, begin offset) for each good record, from byte `start` (just after
    line `lineno`; `end`, `align`: see read_lines)."""
    for line, lineno, offset, begin in read_lines(path, start, lineno, end, align):
        if line.isspace():  # not strip(), which copies every line: visible in a profile of a local bootstrap
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            reason = f"bad JSON ({exc.msg})"
        else:
            text = record.get("text") if isinstance(record, dict) else None
            if isinstance(text, str):
                yield record, text, lineno, offset, line, begin
                continue
            reason = "not a JSON object" if not isinstance(record, dict) else (
                "missing field 'text'" if "text" not in record else f"'text' is {type(text).__name__}, not a string"
            )
        bad.reject(place(path, lineno, begin), reason, strict)


def scan_txt(path: str, start: int = 0, lineno: int = 0, end: int | None = None,
             align: bool = False) -> Iterator[tuple[str, int, int, int]]:
    """(text, lineno, end_offset, begin offset) for each non-blank line, from byte `start` (just after line
    `lineno`; `end`, `align`: see read_lines)."""
    for line, lineno, offset, begin in read_lines(path, start, lineno, end, align):
        text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
        if text.strip():
            yield text, lineno, offset, begin


def scan_parquet(
    path: str, bad: BadRecords, strict: bool, all_columns: bool = False, start_row: int = 0,
    filtered: Filtered | None = None,
) -> Iterator[tuple[dict, int]]:
    """(record, row number from 1) for each row with a string `text` (that passes the filter of `filtered`, which
    counts those that do not), after the first `start_row` rows.

    Reads only `text` and `id` (and the filter's columns) unless `all_columns`; whole row groups before `start_row`,
    and those whose statistics rule out every row of the filter's, are not read.
    """
    parquet = open_parquet(path)
    where, columns = parquet_columns(parquet, path, filtered)
    columns = None if all_columns else columns
    first, row = 0, 0
    while first < parquet.num_row_groups and row + parquet.metadata.row_group(first).num_rows <= start_row:
        row += parquet.metadata.row_group(first).num_rows
        first += 1
    for groups in _runs(parquet.metadata, first, where, filtered):
        if isinstance(groups, int):  # rows of row groups the filter rules out, not read
            row += groups
            continue
        for batch in parquet.iter_batches(batch_size=1000, columns=columns, row_groups=groups):
            for record in batch.to_pylist():
                row += 1
                if row <= start_row:
                    continue
                if filtered is not None and not filtered.passes(record, lambda: f"{path}:row{row}"):
                    continue
                text = record.get("text")
                if isinstance(text, str):
                    yield record, row
                    continue
                bad.reject(f"{path}:row{row}", bad_text_reason(text), strict)


def _runs(metadata, first: int, where: Where | None, filtered: Filtered | None) -> Iterator[list[int] | int]:
    """From row group `first` on: each run of consecutive row groups to read (a list), and between them the rows of
    those the filter's statistics rule out (an int; counted in `filtered`)."""
    run: list[int] = []
    for group in range(first, metadata.num_row_groups):
        row_group = metadata.row_group(group)
        if where is None or where.may_match(row_group):
            run.append(group)
            continue
        if run:
            yield run
            run = []
        filtered.skip_row_group(row_group.num_rows)
        yield row_group.num_rows
    if run:
        yield run


def check_fields(path: str, where: Where) -> None:
    """ConfigError unless the filter's columns are in a parquet file's schema (with types its literals compare with),
    or in the first record of a JSONL file: a source that lacks them is refused as it opens, before anything is read
    or written (later records and files are checked as they are read)."""
    if path.endswith(JSONL_SUFFIXES):
        first = next(scan_jsonl(path, BadRecords(), False), None)
        if first is not None:
            where.matches(first[0], lambda: place(path, first[2], first[5]))
    elif path.endswith(".parquet"):
        schema = open_parquet(path).schema_arrow
        where.check_schema(schema.names, {f.name: f.type for f in schema}, path)


def passing_lines(records: Iterator[tuple], path: str, filtered: Filtered) -> Iterator[tuple]:
    """The items of scan_jsonl(path) whose record passes the filter of `filtered` (which counts the others)."""
    for item in records:
        if filtered.passes(item[0], lambda: place(path, item[2], item[5])):
            yield item


@dataclass(frozen=True, slots=True)
class FilePosition(Position, name="file", version=2):
    """Just after a document of local files: the file's number in the listing, then for JSONL/TXT the byte offset
    after the record and its line number (0: not known, for a reader that began mid-file), for parquet the rows of
    the file read (twice)."""

    file: int
    offset: int
    line: int


def parquet_columns(parquet, path: str, filtered: Filtered | None) -> tuple[Where | None, list[str]]:
    """(the filter's Where, the columns a document needs: `text`, `id` and the filter's, those the file has) of an
    opened parquet file; SourceError for a file without `text`, the filter's own error for a column it lacks."""
    names = parquet.schema_arrow.names
    if "text" not in names:
        raise SourceError(f"{path}: parquet file has no 'text' column (columns: {', '.join(names)})")
    where = filtered.where if filtered is not None else None
    if where is not None:
        where.check_schema(names, {f.name: f.type for f in parquet.schema_arrow}, path)
    wanted = ("text", "id", *(where.columns if where is not None else ()))
    return where, list(dict.fromkeys(c for c in wanted if c in names))

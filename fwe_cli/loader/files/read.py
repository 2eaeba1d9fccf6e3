"""The loader's read of local files: the documents of a reader's pieces (sources.units), nothing else read. A JSONL or
TXT line belongs to the piece it begins in (a reader that begins mid-file skips the line in progress, which is its
predecessor's), a parquet row to the piece its anchor falls in (units.RowGroups), every line of a gzip file to the
piece holding the file's start (it cannot be read from its middle). The readers themselves are files.formats's.
"""

from __future__ import annotations

from typing import Iterator

from fwe_cli.loader.documents import Document, PlaceName
from fwe_cli.loader.files.formats import (
    FilePosition,
    file_size,
    open_parquet,
    parquet_columns,
    passing_lines,
    place,
    scan_jsonl,
    scan_txt,
)
from fwe_cli.loader.remote.object_store import is_url
from fwe_cli.loader.sources.bad_records import BadRecords, bad_text_reason
from fwe_cli.loader.sources.units import Piece, RowGroups
from fwe_cli.loader.sources.where import Filtered


def read_local(files: list[str], pieces: list[Piece], at: FilePosition | None, bad: BadRecords, strict: bool,
               filtered: Filtered | None = None) -> Iterator[tuple[Document, FilePosition, int]]:
    """(document, position just after it, its anchor on the line) for the documents of `pieces` of `files` in order
    that pass the filter of `filtered` (None: all), those of the first piece's file only after `at`: a JSONL or TXT
    line belongs to the piece it begins in, a parquet row to the piece its place in its row group's bytes falls in
    (sources.units), every line of a gzip file to the piece holding the file's start. Nothing outside the pieces is
    read (a .gz is decompressed from its start up to `at`)."""
    parquet, ahead = None, None
    for number, piece in enumerate(pieces):
        path = files[piece.file]
        floor = at if number == 0 and at is not None and at.file == piece.file else None
        if path.endswith(".parquet"):
            if parquet is None or parquet[0] != path:
                opened = ahead.take(path) if ahead is not None else open_parquet(path)
                parquet = (path, opened, RowGroups.of(opened.metadata, file_size(path)))
                ahead = _NextObject(files, pieces, number, filtered) if is_url(path) else None
                if ahead is not None:
                    opened.on_last_get = ahead.start
            rows = _parquet_rows(parquet[1], parquet[2], path, piece, floor.offset if floor else 0, bad, strict,
                                 filtered)
            for record, row, anchor in rows:
                rid = record.get("id")
                name = rid if isinstance(rid, str) else PlaceName(f"{path}:row{row}")
                yield Document(text=record["text"], id=name), FilePosition(piece.file, row, row), piece.on_line(anchor)
            continue
        if floor is not None:
            start, line, align = floor.offset, floor.line, False
        else:
            start, line, align = (0, 0, False) if piece.whole else (piece.lo, 0, True)
        end = None if piece.whole else piece.hi
        if path.endswith(".txt"):
            for text, line, after, begin in scan_txt(path, start, line, end, align):
                yield Document(text=text, id=PlaceName(place(path, line, begin))), \
                    FilePosition(piece.file, after, line), piece.on_line(piece.lo if piece.whole else begin)
            continue
        records = scan_jsonl(path, bad, strict, start, line, end, align)
        if filtered is not None:
            records = passing_lines(records, path, filtered)
        for record, text, line, after, _raw, begin in records:
            rid = record.get("id")
            yield Document(text=text, id=rid if isinstance(rid, str) else PlaceName(place(path, line, begin))), \
                FilePosition(piece.file, after, line), piece.on_line(piece.lo if piece.whole else begin)


class _NextObject:
    """The next parquet object the pieces after `pieces[number]` read: opened in the background, its first GETs asked
    for (files.object_parquet), once `start` is called (when the reader's last GET of the current object is asked
    for), so a reader moving on to it does not wait two round trips, and a first batch does not share its start."""

    def __init__(self, files: list[str], pieces: list[Piece], number: int, filtered: Filtered | None):
        path = files[pieces[number].file]
        self.piece = next((p for p in pieces[number + 1:] if files[p.file] != path), None)
        url = files[self.piece.file] if self.piece is not None else None
        self.url = url if url is not None and is_url(url) and url.endswith(".parquet") else None
        """None: no parquet object comes next."""
        self.filtered = filtered
        self._opened = None  # its Future once started

    def start(self) -> None:
        if self._opened is not None or self.url is None:
            return
        import contextvars

        from fwe_cli.loader.remote.range_file import fetch_pool

        self._opened = fetch_pool().submit(contextvars.copy_context().run, self._open)

    def _open(self):
        parquet = open_parquet(self.url)
        groups = RowGroups.of(parquet.metadata, file_size(self.url))
        _, columns, wanted = _plan(parquet, groups, self.url, self.piece, 0, self.filtered)
        parquet.plan([group for group, _, _ in wanted], columns)
        parquet.fetch_first()
        return parquet

    def take(self, path: str):
        """`path` opened: the one opened ahead when it is this one, else opened now."""
        return self._opened.result() if self._opened is not None and path == self.url else open_parquet(path)


def _plan(parquet, groups: RowGroups, path: str, piece: Piece, done: int, filtered: Filtered | None):
    """(the filter's Where, the columns read, [(row group, first row, end row)] read) of the piece after the file's
    first `done` rows (a row group the filter's statistics rule out is not read)."""
    where, columns = parquet_columns(parquet, path, filtered)
    wanted = []
    for group in range(len(groups.counts)):
        first, end = groups.owned(group, piece.lo, piece.hi)
        first = max(first, done - groups.bases[group])
        if first < end and (where is None or where.may_match(parquet.metadata.row_group(group))):
            wanted.append((group, first, end))
    return where, columns, wanted


def _parquet_rows(parquet, groups: RowGroups, path: str, piece: Piece, done: int, bad: BadRecords,
                  strict: bool, filtered: Filtered | None) -> Iterator[tuple[dict, int, int]]:
    """(record, its row number in the file from 1, its anchor) of each good row of the piece after the file's first
    `done` rows (a row group the filter's statistics rule out is not read: the units of a filtered source leave it
    out already)."""
    where, columns, wanted = _plan(parquet, groups, path, piece, done, filtered)
    if is_url(path):  # an object's row groups (files.object_parquet): the next few fetched while one is decoded
        parquet.plan([group for group, _, _ in wanted], columns)
    for group, first, end in wanted:
        base = groups.bases[group]
        table = parquet.read_row_group(group, columns=columns, use_threads=False).slice(first, end - first)
        for i, record in enumerate(table.to_pylist(), start=first):
            row = base + i + 1
            if filtered is not None and not filtered.passes(record, lambda: f"{path}:row{row}"):
                continue
            if isinstance(record.get("text"), str):
                yield record, row, groups.anchor(base + i)
                continue
            bad.reject(f"{path}:row{row}", bad_text_reason(record.get("text")), strict)

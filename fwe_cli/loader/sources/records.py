"""Whole records with resumable positions: what `fwe bootstrap` copies.

The loader reads `Document`s (text and id) through `DocumentStream`, its fast path. Bootstrap needs more:
the full record (every field, for --fields all), the source's own JSONL line where there is one (copied as
is, not re-encoded), and after each record a position from which a later run continues exactly there:

    synthetic  {"index"}                          next record index of the stream
    local      {"index", "file", "offset", "line"} file number, byte offset (rows for parquet), line number
    hub        {"index", "rows", "state"}          rows read, and `datasets`' own state_dict when it has one

`index` counts the good records of the whole stream (every shard); record i belongs to the shard that
`Shard.owns(i)`, the same rule as the loader, so a bootstrap shard holds exactly the documents the loader gives
that rank.

    stream = RecordStream(RecordSpec(kind="local", local_path="docs.jsonl"))
    for record, line in stream:       # line: the source's JSONL bytes, or None where there is none
        ...
    resume_at = stream.position()     # JSON-able: RecordStream(spec, start=resume_at) continues after it
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

import orjson

from fwe_cli.loader.config import Shard
from fwe_cli.errors import SourceError
from fwe_cli.loader.sources.hub import hub_rows
from fwe_cli.loader.sources.local import JSONL_SUFFIXES, BadRecords, resolve_files, scan_jsonl, scan_parquet, scan_txt
from fwe_cli.loader.sources.synthetic import synthetic_record


@dataclass(frozen=True)
class RecordSpec:
    """Which records to read."""

    kind: str
    """'hub', 'local' or 'synthetic'."""
    local_path: str | None = None
    """For 'local': file, directory, glob or bootstrap directory (as the loader's --local-path)."""
    dataset: str = "HuggingFaceFW/fineweb-edu"
    """For 'hub': dataset repository id."""
    name: str | None = "sample-10BT"
    """For 'hub': dataset config name."""
    split: str = "train"
    """For 'hub': split."""
    revision: str | None = None
    """For 'hub': commit to read (None: the default branch as it is now)."""
    seed: int = 0
    """For 'synthetic': the stream's seed."""
    shard: Shard = field(default_factory=Shard)
    """Which records of the stream to yield."""
    strict: bool = False
    """A malformed record raises SourceError instead of being counted in `bad` and skipped."""
    all_fields: bool = False
    """Read every column (Hub, parquet); otherwise only `text` and `id` where the format allows choosing."""


class RecordStream:
    """Iterate (record, source line or None) for a spec, from an optional saved position."""

    def __init__(self, spec: RecordSpec, start: dict | None = None, bad: BadRecords | None = None):
        self.spec = spec
        self.bad = bad if bad is not None else BadRecords()
        self.files: list[str] = []
        start = start or {}
        self._index = int(start.get("index", 0))
        self._file = int(start.get("file", 0))
        self._offset = int(start.get("offset", 0))
        self._line = int(start.get("line", 0))
        self._rows = int(start.get("rows", 0))
        self._hub_state = start.get("state")
        self._hub = None
        self._hub_stateful = False
        self._opened = False
        self.revision_pinned: bool | None = None
        """For the Hub: whether the stream was opened at spec.revision (None until opened, or not the Hub)."""

    def open(self) -> "RecordStream":
        """List local files or open the Hub stream (a network handshake); done by the first iteration if not before."""
        if self._opened:
            return self
        if self.spec.kind == "local":
            self.files = resolve_files(self.spec.local_path)
            if self._file > len(self.files):
                raise SourceError(f"saved position names file #{self._file} but {self.spec.local_path} has "
                                  f"{len(self.files)} files")
        elif self.spec.kind == "hub":
            self._open_hub()
        self._opened = True
        return self

    def position(self) -> dict:
        """Where a new stream must start to continue just after the last record yielded."""
        kind = self.spec.kind
        if kind == "synthetic":
            return {"index": self._index}
        if kind == "local":
            return {"index": self._index, "file": self._file, "offset": self._offset, "line": self._line}
        state = None
        if self._hub_stateful:
            state = self._hub.state_dict()
            try:
                orjson.dumps(state)
            except TypeError:
                state = None
        return {"index": self._index, "rows": self._rows, "state": state}

    def fingerprint(self) -> list[dict]:
        """The local files with size and modification time, to notice a source that changed under a resume."""
        out = []
        for path in self.files:
            info = os.stat(path)
            out.append({"path": os.path.abspath(path), "bytes": info.st_size, "mtime_ns": info.st_mtime_ns})
        return out

    def __iter__(self) -> Iterator[tuple[dict, bytes | None]]:
        self.open()
        if self.spec.kind == "synthetic":
            return self._synthetic()
        if self.spec.kind == "local":
            return self._local()
        return self._hub_rows()

    # -- synthetic ---------------------------------------------------------------------------------------
    def _synthetic(self) -> Iterator[tuple[dict, None]]:
        shard, seed = self.spec.shard, self.spec.seed
        index = shard.first_owned(self._index)
        while True:
            self._index = index + 1
            yield synthetic_record(seed, index), None
            index += shard.mod

    # -- local -------------------------------------------------------------------------------------------
    def _local(self) -> Iterator[tuple[dict, bytes | None]]:
        shard = self.spec.shard
        index = self._index
        for file_no in range(self._file, len(self.files)):
            start, line = (self._offset, self._line) if file_no == self._file else (0, 0)
            for record, _text, lineno, end, raw in self._scan(self.files[file_no], start, line):
                owned = shard.owns(index)
                index += 1
                if owned:
                    self._file, self._offset, self._line, self._index = file_no, end, lineno, index
                    yield record, raw

    def _scan(self, path: str, start: int, line: int) -> Iterator[tuple[dict, str, int, int, bytes | None]]:
        """scan_jsonl's (record, text, line or row number, end position, raw JSONL line or None) for any format.

        For JSONL, the hot path, it is scan_jsonl itself, with no adapter generator in between."""
        if path.endswith(JSONL_SUFFIXES):
            return scan_jsonl(path, self.bad, self.spec.strict, start, line)
        if path.endswith(".txt"):
            return (({"text": text}, text, lineno, end, None) for text, lineno, end in scan_txt(path, start, line))
        rows = scan_parquet(path, self.bad, self.spec.strict, self.spec.all_fields, start_row=start)
        return ((record, record["text"], row, row, None) for record, row in rows)

    # -- hub ---------------------------------------------------------------------------------------------
    def _open_hub(self) -> None:
        from fwe_cli.loader.sources.hub import open_hub_stream  # looked up at call time, so tests can stand in for it

        spec = self.spec
        try:
            stream = open_hub_stream(spec.dataset, spec.name, spec.split, revision=spec.revision,
                                     all_columns=spec.all_fields)
            self.revision_pinned = spec.revision is not None
        except SourceError:
            if spec.revision is None:
                raise
            # An endpoint (a mirror, a test server) may list a sha it cannot serve files for: read its default
            # branch instead, and say so (bootstrap records revision_pinned=false for the run).
            stream = open_hub_stream(spec.dataset, spec.name, spec.split, all_columns=spec.all_fields)
            self.revision_pinned = False
        fresh = self._rows == 0
        if self._hub_state is not None:
            try:
                stream.load_state_dict(self._hub_state)
                self._hub_stateful = True
            except Exception:  # a state from another datasets version: fall back to skipping rows
                stream = stream.skip(self._rows)
        elif not fresh:
            stream = stream.skip(self._rows)
        else:
            self._hub_stateful = hasattr(stream, "state_dict")
        self._hub = stream

    def _hub_rows(self) -> Iterator[tuple[dict, None]]:
        spec = self.spec
        index = self._index
        for row, rows in hub_rows(self._hub, spec.dataset, self.bad, spec.strict, rows=self._rows):
            owned = spec.shard.owns(index)
            index += 1
            if owned:
                self._index, self._rows = index, rows
                yield row, None

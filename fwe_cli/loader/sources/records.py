"""Whole records with resumable positions: what `fwe bootstrap` copies.

The loader reads `Document`s (text and id) through `DocumentStream`, its fast path. Bootstrap needs more:
the full record (every field, for --fields all), the source's own JSONL line where there is one (copied as
is, not re-encoded), and after each record a position from which a later run continues exactly there:

    synthetic  {"index"}                          next record index of the stream
    local      {"index", "file", "offset", "line"} file number, byte offset (rows for parquet), line number
    hub        {"index", "rows", "state"}          rows read, and `datasets`' own state_dict when it has one

`index` counts the good records of the whole stream (every shard); record i belongs to the shard that
`Shard.owns(i)` (i % mod == rem: a node of `fwe bootstrap`; the loader deals its readers by units instead,
sources.deal). Each kind's Source makes its own Records (`Source.records`):

    records = open_source(spec, ReadOptions(strict=False)).records(shard)
    for record, line in records:       # line: the source's JSONL bytes, or None where there is none
        ...
    resume_at = records.position()     # JSON-able: source.records(shard, start=resume_at) continues after it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from fwe_cli.loader.sources.bad_records import BadRecords

if TYPE_CHECKING:
    from fwe_cli.loader.shard import Shard


class RecordSource(Protocol):
    """What a Records asks of the Source it reads (a Source makes its Records: this module imports no Source)."""

    options: Any
    files: list[str]

    def open(self, set_stage: Callable[[str], None]) -> None: ...

    def fingerprint(self) -> list[dict] | None: ...


class Records:
    """Iterate (record, source line or None) of one shard of a source, from an optional saved position."""

    revision_pinned: bool | None = None
    """For the Hub: whether the stream was opened at the spec's revision (None until opened, or not the Hub)."""

    def __init__(self, source: RecordSource, shard: Shard, start: dict | None = None, all_fields: bool = False,
                 bad: BadRecords | None = None):
        self.source = source
        self.shard = shard
        self.all_fields = all_fields
        self.strict = source.options.strict
        self.bad = bad if bad is not None else BadRecords()
        self.start = start or {}
        self.index = int(self.start.get("index", 0))
        """Good records of the whole stream read so far (every shard counted)."""
        self._opened = False

    @property
    def files(self) -> list[str]:
        return self.source.files

    @property
    def revision(self) -> str | None:
        """The Hub commit read (the spec's: bootstrap pins it); None for other sources."""
        return None

    def open(self) -> "Records":
        """List files or open the Hub stream (a network handshake); done by the first iteration if not before."""
        if not self._opened:
            self._open()
            self._opened = True
        return self

    def _open(self) -> None:
        self.source.open(lambda stage: None)

    def fingerprint(self) -> list[dict] | None:
        """The source's files as they are now (a resumed bootstrap refuses a source that changed)."""
        return self.source.fingerprint()

    def position(self) -> dict:
        """Where a new stream must start to continue just after the last record yielded."""
        return {"index": self.index}

    def __iter__(self) -> Iterator[tuple[dict, bytes | None]]:
        self.open()
        return self._records()

    def _records(self) -> Iterator[tuple[dict, bytes | None]]:
        raise NotImplementedError

"""A bootstrap of the Hub read from disk, continued from the Hub (`--local-path BOOTSTRAP --tail hub`): a composite
source whose child is the bootstrap (its parts) and whose stream is the Hub's own, with every document the bootstrap
holds served from its parts.

`fwe bootstrap` from the Hub records in its manifest the listing it read (`hub_listing`, at the pinned `revision`),
where each parquet file's documents start in the parts (`hub_files[].first`: part, byte offset, line) and the first
document it did not write (`hub_next`: file, row group, row). The stream is the Hub's, file by file in the epoch's
order (shuffled like the Hub's): the rows of a file the bootstrap holds come from its parts, the rest from the Hub by
range reads (hub_parquet), from `hub_next` in the file where it stopped. So for every shard and shuffle the
documents are exactly `--source hub --revision REV`'s, and the cursor is one: a `HeadTailPosition` holds the file's
place in the epoch's order and the position in it of the part it is in (the parts' FilePosition in the head, a
HubRowPosition in the tail); a position in the tail reopens the Hub there without reading the parts. Documents carry
their segment ('head' or 'tail'); each batch is counted by the segment it came from (`on_batch`, `figures`).

The Hub reader opens with the epoch (its listing comes from the manifest: no request) and its read-ahead starts with
the consumer's second batch, so footers and the first row groups of the tail are fetched while the head is served.
When the tail cannot be read (the Hub down or offline), the head is served in full and the boundary raises
`TailUnreachable`, counting the documents served; a state saved then resumes into the tail once the Hub is back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Iterator

from fwe_cli.artifacts import utc_iso
from fwe_cli.errors import ConfigError, SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.base import Emit, Order, Source
from fwe_cli.loader.sources.file_sources import BootstrapDir
from fwe_cli.loader.sources.head_tail_map import where_rows_are
from fwe_cli.loader.sources.hub_source import HubRowPosition, iter_hub
from fwe_cli.loader.sources.local import FilePosition
from fwe_cli.loader.sources.local_files import bootstrap_manifest_path, read_manifest
from fwe_cli.loader.sources.position import Position

HEAD, TAIL = "head", "tail"


@dataclass(frozen=True, slots=True)
class HeadTailPosition(Position, name="head_tail"):
    """In the stream's file `file` (its place in the epoch's order): `at`, a FilePosition in the bootstrap's parts or
    a HubRowPosition in the file's Hub rows."""

    file: int
    at: Position

    def check(self) -> None:
        Position.check(self)  # (a slotted dataclass's methods cannot call super() bare)
        if not isinstance(self.at, (FilePosition, HubRowPosition)):
            raise ValueError(f"at must be a file or hub_row position, got {self.at.name}")


class TailUnreachable(SourceError):
    """The Hub tail of a bootstrap could not be read where the local copy ends."""


class HeadTail(Source):
    """A Hub bootstrap's parts, then the Hub (see the module docstring)."""

    children_allowed = (1, 1)
    position_type = HeadTailPosition
    uses_hub = True
    grows = True  # parts appended (--grow, an extended bootstrap) move no position: the epoch order is the listing's

    @classmethod
    def check_spec(cls, spec) -> None:
        super().check_spec(spec)
        if spec.children[0].kind != "local":
            raise ConfigError(f"--tail hub continues a bootstrap read from disk: give --local-path BOOTSTRAP_DIR, not "
                              f"--source {spec.children[0].kind}")
        if spec.children[0].options.where is not None:
            raise ConfigError("--where does not filter a bootstrap continued from the Hub (--tail hub): read the "
                              "bootstrap alone with --where, or the Hub itself (--source hub --where ...)")

    @classmethod
    def location(cls, spec) -> str:
        return f"{spec.children[0].options.local_path} then the Hub"

    @classmethod
    def make_child(cls, spec, options) -> Source:
        return BootstrapDir(spec, options)  # the parts as text, even where token shards were made from them

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self.head = self.children[0]
        """The bootstrap's parts."""
        self.manifest: dict | None = None
        self.listing = None
        self.head_docs = 0
        """Documents served from the parts so far."""
        self.tail_docs = 0
        """Documents served from the Hub so far."""
        self._reader = None
        self._tail_files: list[int] = []  # the listing index of each file the Hub reader reads, in its order ...
        self._tail_starts: list[tuple[int, int]] = []  # ... and the (row group, row) it reads each from
        self.growth = None
        """With --grow: the bootstrap's grower (sources.growth), which holds its lock while this source is open."""
        self._batches = {HEAD: 0, TAIL: 0}
        self._boundary: dict | None = None

    # -- opening ---------------------------------------------------------------------------------------------------
    def open(self, set_stage: Callable[[str], None]) -> None:
        if self.manifest is not None:
            return
        path = self.head.spec.options.local_path
        set_stage(f"opening source (listing the bootstrap {path} and its Hub tail)")
        manifest_path = bootstrap_manifest_path(path)
        if manifest_path is None:
            raise ConfigError(f"--tail hub continues a bootstrap of the Hub; {path} is none (no bootstrap manifest)")
        manifest = self._start_growth(path) if self.options.grow else None
        manifest = manifest or read_manifest(manifest_path)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("hub_listing"), list):
            raise ConfigError(f"--tail hub continues a bootstrap of the Hub from where it stopped; {manifest_path} "
                              f"(source {manifest.get('source') if isinstance(manifest, dict) else None!r}) records "
                              "no Hub listing and position: make it with `fwe bootstrap --source hub` (native reader)")
        self.head.open(set_stage)  # parts checked against the manifest (size; sha256 with --verify-parts)
        self.files = self.head.files
        self.listing, self.local, self.hub_from = where_rows_are(manifest, len(self.files))
        self.revision = manifest["revision"]
        self.manifest = manifest

    def _start_growth(self, path: str) -> dict | None:
        """Take the bootstrap's lock for growing it; its manifest read under the lock (None: not growing)."""
        from fwe_cli.loader.sources.growth import Growth

        self.growth = Growth(path)
        return self.growth.start()

    # -- reading ---------------------------------------------------------------------------------------------------
    def documents(self, epoch: int, at: HeadTailPosition | None,
                  order: Order) -> Iterator[tuple[Document, HeadTailPosition]]:
        files = order(list(range(len(self.listing.files))), epoch)
        begin = at.file if at else 0
        in_tail = at is not None and isinstance(at.at, HubRowPosition)
        hub = [(n, files[n]) for n in range(begin, len(files)) if self.hub_from[files[n]] is not None]
        starts = [(at.at.group, at.at.row) if in_tail and n == begin else self.hub_from[i] for n, i in hub]
        self._open_tail([i for _, i in hub], starts)
        return self._walk(files, begin, at, hub)

    def _open_tail(self, indices: list[int], starts: list[tuple[int, int]], number: int = 0) -> None:
        """The Hub reader over the files the stream reads from the Hub, in order, each from its start, reading from
        the `number`th of them; its thread starts now (its read-ahead waits for the consumer's second batch, then
        runs while the head is served). A Hub that cannot be reached fails its reads at once: the head is the
        way out, and the boundary tries once more (`_rows`)."""
        import dataclasses

        from fwe_cli.loader.sources.hub_parquet import HubParquetReader

        if self._reader is not None:
            self._reader.close()
        self._tail_files, self._tail_starts = list(indices), list(starts)
        listing = dataclasses.replace(self.listing, files=tuple(self.listing.files[i] for i in indices))
        first = starts[number] if number < len(starts) else (0, 0)
        self._reader = HubParquetReader(listing, start=(number, *first), fail_fast=True,
                                        first_rows={j: s for j, s in enumerate(starts) if j > number})
        self._groups = iter(self._reader) if indices else iter(())
        self._pending = None  # a row group taken from the reader that belongs to a later file
        if indices:
            self._reader.start_reading()

    def _walk(self, files: list[int], begin: int, at: HeadTailPosition | None,
              hub: list[tuple[int, int]]) -> Iterator[tuple[Document, HeadTailPosition]]:
        tail_of = {n: j for j, (n, _i) in enumerate(hub)}
        for n in range(begin, len(files)):
            index = files[n]
            if index in self.local and not (at and isinstance(at.at, HubRowPosition) and n == begin):
                start = at.at if at and n == begin else FilePosition(*self.local[index][0])
                yield from self._head(n, index, start, self.local[index][1])
            if n in tail_of:
                yield from self._tail(n, tail_of[n])

    def _head(self, n: int, index: int, start: FilePosition, end: tuple) -> Iterator[tuple[Document, HeadTailPosition]]:
        """Listing file `index`'s rows in the parts (the stream's file `n`), from `start` up to `end` (a (part,
        offset, line) position)."""
        for doc, after in self.head.documents(0, start, _as_listed):
            if (after.file, after.offset) > end[:2]:
                return
            self.head_docs += 1
            doc.segment = HEAD
            last = (after.file, after.offset) == end[:2]
            continues = self.hub_from[index] if last else None
            # after the file's last local row, where its Hub rows begin: a position there reads no part again
            yield doc, HeadTailPosition(n, after if continues is None else HubRowPosition(n, *continues))
            if last:
                return

    def _tail(self, n: int, j: int) -> Iterator[tuple[Document, HeadTailPosition]]:
        """The Hub rows of reader file `j` (the stream's file `n`), as Documents."""
        for doc, (group, row) in iter_hub(self._rows(j), self.listing.repo, self.bad, self.options.strict):
            self.tail_docs += 1
            doc.segment = TAIL
            yield doc, HeadTailPosition(n, HubRowPosition(n, group, row))

    def _rows(self, j: int) -> Iterator[tuple[dict, tuple]]:
        """Rows of reader file `j` with their (row group, row) after them, up to the file's last row group."""
        retried = False
        while True:
            try:
                item, self._pending = self._pending or next(self._groups), None
            except StopIteration:
                return
            except SourceError as exc:
                if self.tail_docs == 0 and not retried:  # the read-ahead failed while the head was served (an
                    retried = True                      # hour ago, maybe): at the boundary, once more afresh
                    self._open_tail(self._tail_files, self._tail_starts, j)
                    self._reader.read_ahead_now()
                    continue
                raise TailUnreachable(
                    f"the Hub tail of {self.head.spec.options.local_path} cannot be read ({exc}): the local copy was served in "
                    f"full, {self.head_docs} documents; a state saved now (--save-state, loader.state_dict()) resumes "
                    "into the tail once the Hub is back") from exc
            number, group, columns, last = item
            if number != j:  # file j's start is past its last row group: nothing of it is left to read
                self._pending = item
                return
            first_group, first_row = self._reader.begins_at(number)
            skip = first_row if group == first_group else 0
            names = list(columns)
            rows = len(next(iter(columns.values()), ()))
            grow = self.growth.row if self.growth is not None and self.growth.active else None
            for row, values in enumerate(zip(*columns.values()), start=1):
                if row > skip:
                    record = dict(zip(names, values))
                    if grow is not None:
                        grow(self._tail_files[j], group, row, record, rows, last)
                    yield record, (group, row)
            if last:
                return

    def read_ahead_now(self) -> None:
        if self._reader is not None:
            self._reader.read_ahead_now()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self.growth is not None:
            self.growth.close()

    # -- per-segment figures ---------------------------------------------------------------------------------------
    def on_batch(self, segment: Hashable, step: int, fetch_s: float, emit: Emit) -> dict:
        """Count the batch by its segment; the first tail batch is the boundary (a `fineweb_tail_started` line)."""
        if segment not in self._batches:
            return {}
        self._batches[segment] += 1
        if segment == TAIL and self._boundary is None:
            self._boundary = {"step": step, "fetch_ms": round(fetch_s * 1000, 3), "iso": utc_iso(),
                              "head_documents": self.head_docs}
            emit("fineweb_tail_started", step=step, dt_fetch_s=round(fetch_s, 6), head_documents=self.head_docs)
        return {"part": segment}

    def figures(self) -> dict:
        """{"parts": {head_batches, tail_batches, boundary}} (none before the first batch)."""
        if not any(self._batches.values()):
            return {}
        return {"parts": {"head_batches": self._batches[HEAD], "tail_batches": self._batches[TAIL],
                          "boundary": self._boundary}}

    # -- identity --------------------------------------------------------------------------------------------------
    def describe(self) -> dict:
        manifest = self.manifest or {}
        grown = {"grown": self.growth.describe()} if self.growth is not None else {}
        return {"kind": self.spec.kind, "path": self.head.spec.options.local_path, "files": len(self.head.files),
                "tail": "hub", "dataset": manifest.get("dataset"), "revision": self.revision,
                "head_documents": self.head_docs, "tail_documents": self.tail_docs,
                "bad_records": self.bad.to_dict(), **grown}

    def pinned(self) -> dict:
        """The Hub commit the bootstrap read (from its manifest when not opened yet: a resume state's check)."""
        revision = self.revision
        if revision is None:
            manifest_path = bootstrap_manifest_path(self.head.spec.options.local_path)
            manifest = read_manifest(manifest_path) if manifest_path else None
            revision = manifest.get("revision") if isinstance(manifest, dict) else None
        return {"revision": revision}

    def legacy_position(self, values: list) -> HeadTailPosition:
        """A position saved by fwe before typed positions: ["L", file, part, offset, line] or ["H", file, group,
        row]."""
        part, n, *rest = values
        return HeadTailPosition(n, FilePosition(*rest) if part == "L" else HubRowPosition(n, *rest))


def _as_listed(files: list, epoch: int) -> list:
    """The parts in their own order: the listing's order is the stream's, the parts are read by position."""
    return files

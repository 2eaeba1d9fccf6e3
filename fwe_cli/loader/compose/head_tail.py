"""A bootstrap of the Hub read from disk, continued from the Hub (`--local-path BOOTSTRAP --tail hub`): a composite
source whose child is the bootstrap (its parts) and whose stream is the Hub's own, with every document the bootstrap
holds served from its parts.

`fwe bootstrap` from the Hub records in its manifest the listing it read (`hub_listing`, at the pinned `revision`),
where each parquet file's documents start in the parts (`hub_files[].first`: part, byte offset, line) and the first
document it did not write (`hub_next`: file, row group, row). The stream is the Hub's: its units are the listing's
files (sources.units), so every reader's share, shuffle and cursor are those of `--source hub --revision REV`; the
rows of a file the bootstrap holds come from its parts, the rest from the Hub by range reads (hub.readahead), from
`hub_next` in the file where it stopped. A row of the parts is anchored where its Hub row is (the file's footer, kept
in the head cache, places it: the bootstrap holds the Hub file's rows in order), so with any readers and shuffle the
documents are exactly the Hub's (a bootstrap that skipped bad rows is still read exactly once, in another split). A
`HeadTailPosition` holds the file and the position in it (a `HeadRowPosition` in the parts, a HubRowPosition on the
Hub); a position in the tail reopens the Hub there without reading the parts. Documents carry their segment ('head'
or 'tail'); each batch is counted by the segment it came from (`on_batch`, `figures`).

The Hub reader's read-ahead starts with the consumer's second batch, so footers and the first row groups of the tail
are fetched while the head is served. When the tail cannot be read (the Hub down or offline), the head is served in
full (a reader of whole files needs no footer) and the boundary raises `TailUnreachable`, counting the documents
served; a state saved then resumes into the tail once the Hub is back.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterator

from fwe_cli.artifacts import utc_iso
from fwe_cli.errors import ConfigError, SourceError
from fwe_cli.loader.compose.head_tail_map import HeadRowPosition, HeadTailPosition, where_rows_are
from fwe_cli.loader.documents import Document, PlaceName
from fwe_cli.loader.files.formats import scan_jsonl
from fwe_cli.loader.files.text import BootstrapDir
from fwe_cli.loader.hub.source import HubRowPosition, iter_hub
from fwe_cli.loader.remote.object_store import is_url
from fwe_cli.loader.sources.base import Emit, Source
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.units import Piece, RowGroups, Unit

HEAD, TAIL = "head", "tail"


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
        self.growth = None
        """With --grow: the bootstrap's grower (compose.growth), which holds its lock while this source is open."""
        self._batches = {HEAD: 0, TAIL: 0}
        self._boundary: dict | None = None

    # -- opening ---------------------------------------------------------------------------------------------------
    def open(self, set_stage: Callable[[str], None]) -> None:
        if self.manifest is not None:
            return
        path = self.head.spec.options.local_path
        set_stage(f"opening source (listing the bootstrap {path} and its Hub tail)")
        found = self.head.manifest()  # on this disk or in an object store
        if found is None:
            raise ConfigError(f"--tail hub continues a bootstrap of the Hub; {path} is none (no bootstrap manifest)")
        manifest_path, manifest = found
        if self.options.grow and is_url(path):
            raise ConfigError(f"--grow appends the Hub tail to a bootstrap on this disk; {path} is in an object store: "
                              "read it with --tail hub alone (or grow a copy on disk)")
        manifest = (self._start_growth(path) if self.options.grow else None) or manifest
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
        from fwe_cli.loader.compose.growth import Growth

        self.growth = Growth(path)
        return self.growth.start()

    # -- reading --------------------------------------------------------------------------------------------------
    def units(self) -> list[Unit]:
        """The Hub's: a unit per file of the listing the bootstrap read."""
        return [Unit(number, 0, file.size) for number, file in enumerate(self.listing.files)]

    def read(self, pieces: list[Piece], at: HeadTailPosition | None) -> Iterator[tuple[Document, HeadTailPosition,
                                                                                     int]]:
        """The rows of `pieces` (the first one's after `at`): those the bootstrap holds from its parts, the rest
        from the Hub, whose reader starts now (its read-ahead runs while the head is served)."""
        inside = at.at if at is not None and pieces and at.file == pieces[0].file else None
        self._open_tail([p for p in pieces if self.hub_from[p.file] is not None],
                        inside if isinstance(inside, HubRowPosition) else None)
        for number, piece in enumerate(pieces):
            floor = inside if number == 0 else None
            if piece.file in self.local:
                yield from self._head(piece, floor)
            if self.hub_from[piece.file] is not None:
                yield from self._tail(piece)

    def _open_tail(self, pieces: list[Piece], at: HubRowPosition | None) -> None:
        """The Hub reader over the pieces the stream reads from the Hub, each after its file's rows in the parts
        (`at`: the first one's after that row too); its thread starts now (its read-ahead waits for the consumer's
        second batch, then runs while the head is served). A Hub that cannot be reached fails its reads at once: the
        head is the way out, and the boundary tries once more (`_rows`)."""
        from fwe_cli.loader.hub.readahead import HubParquetReader

        if self._reader is not None:
            self._reader.close()
        floors = {j: HubRowPosition(j, *start) for j, start in self.hub_from.items() if start is not None}
        self._tail_pieces, self._tail_at = pieces, at
        self._reader = HubParquetReader(self.listing, pieces, at, head=self._cache(), floors=floors, fail_fast=True)
        self._groups = iter(self._reader) if pieces else iter(())
        self._pending = None  # a row group taken from the reader that belongs to a later piece
        self._next = 0  # the reader's piece the stream reads next
        if pieces:
            self._reader.start_reading()

    def _cache(self):
        """The head cache of the listing (footers kept there place the parts' rows), None with --no-cache."""
        if self.options.hub_cache and self.__dict__.get("_head_cache") is None:
            from fwe_cli.loader.hub.head_cache import HeadCache

            self._head_cache = HeadCache(self.listing)
        return self.__dict__.get("_head_cache")

    def _rows_of(self, file: int, whole: bool) -> RowGroups | None:
        """Where file `file`'s rows lie in its bytes, from its footer (head cache, else the Hub); None when the Hub
        cannot be asked and `whole` (a reader of the whole file needs no footer: its rows are all its own)."""
        from fwe_cli.loader.hub.footers import file_rows

        try:
            return file_rows(self.listing, file, self._cache())
        except SourceError:
            if whole:
                return None
            raise

    def _head(self, piece: Piece, floor: Position | None) -> Iterator[tuple[Document, HeadTailPosition, int]]:
        """Listing file `piece.file`'s rows in the parts anchored in the piece, after `floor` (a HeadRowPosition, or a
        HubRowPosition in the file's rows the parts may hold since: a bootstrap grown); the parts are scanned from the
        file's first row there (a row's place in the file's bytes is known by its number), and not at all when the
        floor lies past them."""
        j = piece.file
        (part, offset, line), end = self.local[j]
        places = self._rows_of(j, piece.lo == 0 and piece.hi >= self.listing.files[j].size)
        row = skip = 0
        if isinstance(floor, HeadRowPosition):
            part, offset, line, row = floor.part, floor.offset, floor.line, floor.row
        elif isinstance(floor, HubRowPosition):
            skip = places.number(floor.group, floor.row)
            held = places.number(*self.hub_from[j]) if self.hub_from[j] is not None else places.total
            if skip >= held:
                return
        while part < len(self.files) and (part, offset) < end[:2]:
            stop = end[1] if part == end[0] else None
            for record, text, line, after, _raw, _begin in scan_jsonl(self.files[part], self.bad, self.options.strict,
                                                                       offset, line, stop):
                at = places.anchor(row) if places is not None else piece.lo
                row += 1
                if at < piece.lo or row <= skip:
                    continue
                if at >= piece.hi:
                    return
                self.head_docs += 1
                rid = record.get("id")
                doc = Document(text=text, id=rid if isinstance(rid, str) else PlaceName(f"{self.files[part]}:{line}"))
                doc.segment = HEAD
                yield doc, HeadTailPosition(j, HeadRowPosition(part, after, line, row)), piece.on_line(at)
            part, offset, line = part + 1, 0, 0

    def _tail(self, piece: Piece) -> Iterator[tuple[Document, HeadTailPosition, int]]:
        """The Hub rows of the piece, as Documents."""
        rows = ((record, HeadTailPosition(piece.file, after), anchor) for record, after, anchor in self._rows(piece))
        for doc, after, anchor in iter_hub(rows, self.listing.repo, self.bad, self.options.strict):
            self.tail_docs += 1
            doc.segment = TAIL
            yield doc, after, anchor

    def _rows(self, piece: Piece) -> Iterator[tuple[dict, HubRowPosition, int]]:
        """The piece's rows from the Hub reader, each with its position and anchor on the line."""
        retried = False
        while True:
            try:
                item, self._pending = self._pending or next(self._groups), None
            except StopIteration:
                return
            except SourceError as exc:
                if self.tail_docs == 0 and not retried:  # the read-ahead failed while the head was served (an
                    retried = True                      # hour ago, maybe): at the boundary, once more afresh
                    self._open_tail(self._tail_pieces[self._next:], self._tail_at if self._next == 0 else None)
                    self._reader.read_ahead_now()
                    continue
                raise TailUnreachable(
                    f"the Hub tail of {self.head.spec.options.local_path} cannot be read ({exc}): the local copy was "
                    f"served in full, {self.head_docs} documents; a state saved now (--save-state, "
                    "loader.state_dict()) resumes into the tail once the Hub is back") from exc
            number, group, columns, first, end, count, last, (start, stop) = item
            if self._reader.pieces[number] is not piece:  # past this piece: its rows are all read
                self._pending = item
                self._next += 1
                return
            names = list(columns)
            grow = self.growth.row if self.growth is not None and self.growth.active else None
            for i, values in enumerate(zip(*columns.values())):
                if first <= i < end:
                    record = dict(zip(names, values))
                    if grow is not None:
                        grow(piece.file, group, i + 1, record, count, last)
                    yield record, HubRowPosition(piece.file, group, i + 1), piece.on_line(start + (stop - start) *
                                                                                          i // count)

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
            manifest = (self.head.manifest() or (None, None))[1]
            revision = manifest.get("revision") if isinstance(manifest, dict) else None
        return {"revision": revision}

"""How `fwe bootstrap` reads one Hub parquet file: its footer first, then either the whole file or only the row
groups the target needs.

- **Whole** (the target needs the file to its end, as far as the footer's sizes tell): every byte, in as many range
  requests as the file has connections (cut at row-group boundaries, so each row group lands with one of them), the
  sha256 of every byte checked against the listing's LFS sha256 once the last one lands.
- **By row group** (the target ends inside the file): the wanted columns' bytes of each row group the target needs
  (`--fields text`: `text` and `id`; `all`: every column), fetched a few ahead of the converter, each one's length
  checked against the footer and its sha256 recorded (`row_groups` in the manifest's `hub_files` entry).

    read = FileRead(fetcher, url, hub_file, fields, begins=(group, row))   # the footer is being fetched
    read.plan(whole=True, pieces=4)          # after read.footer: what to fetch
    read.need(group, room)                   # by row group: fetch this group, and those after it `room` may need
    start, end = read.span(group)            # the bytes a group's conversion reads
"""

from __future__ import annotations

from fwe_cli.bootstrap.hub_download import Fetcher
from fwe_cli.errors import SourceError
from fwe_cli.loader.hub.listing import HubFile
from fwe_cli.loader.hub.ranges import fetch_range, parquet_footer
from fwe_cli.loader.remote.parquet_spans import column_span

ROW_OVERHEAD = 24  # bytes of JSON around a row's text and id: {"text":"","id":""} and the newline
LOOKAHEAD_GROUPS = 4  # by row group: at most this many fetched ahead of the converter
# A file the target needs at least this many times its size of JSONL from is fetched whole before its footer is read
# (JSONL is 1.5-2.5 times FineWeb-Edu's parquet): its download starts a round trip sooner.
EARLY_WHOLE = 3.0


def _footer(url: str, file: HubFile):
    return parquet_footer(url, file, lambda u, f, start, end: fetch_range(u, start, end))


class FileRead:
    """One file of the stream: its footer (a Future, fetched ahead of every span), then its download."""

    def __init__(self, fetcher: Fetcher, url: str, file: HubFile, fields: str, begins: tuple[int, int] = (0, 0)):
        self.url, self.file, self.fields, self.begins = url, file, fields, begins
        self._fetcher = fetcher
        self.footer = fetcher.submit(lambda: _footer(url, file))
        self.metadata = None
        self.rows: list[int] = []
        """Rows per row group."""
        self.download = None
        self.whole: bool | None = None
        """Fetched whole (sha256 checked) or by row group; None until planned."""
        self.converted: set[int] = set()
        """Row groups converted from this download."""
        self._requested: set[int] = set()
        self._spans: list[tuple[int, int]] = []
        self._estimates: list[int] = []
        self._bounds: list[tuple[int, int]] = []

    def resolve(self) -> None:
        """Wait for the footer (SourceError when it cannot be read) and read the row groups' rows, spans and sizes."""
        if self.metadata is not None:
            return
        metadata, self._footer_start, self._footer_bytes = self.footer.result()
        names = metadata.schema.to_arrow_schema().names
        if "text" not in names:
            raise SourceError(f"{self.file.path}: parquet file has no 'text' column (columns: {', '.join(names)})")
        wanted = names if self.fields == "all" else [n for n in ("text", "id") if n in names]
        groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
        self.rows = [group.num_rows for group in groups]
        self._spans = [column_span(group, wanted) for group in groups]
        self._estimates = [sum(group.column(j).total_uncompressed_size for j in range(group.num_columns)
                               if group.column(j).path_in_schema.split(".")[0] in wanted)
                           + ROW_OVERHEAD * group.num_rows for group in groups]
        self._bounds = [column_span(group, names) for group in groups]
        self.metadata = metadata
        if self.download is not None:  # fetched whole from before its footer was read: a reader needs it now
            self.download.put(self._footer_start, self._footer_bytes)

    def first_group(self) -> int:
        return self.begins[0]

    def estimate(self, group: int) -> int:
        """JSONL bytes the group is expected to give (its wanted columns uncompressed, plus the JSON around rows)."""
        return self._estimates[group]

    def estimate_left(self, scale: float) -> float:
        """JSONL expected from the groups of this file not converted yet (fetched or to be fetched); before its
        footer, as much as a file fetched whole before it is planned at most (EARLY_WHOLE times its size)."""
        if self.metadata is None:
            return EARLY_WHOLE * self.file.size
        groups = range(self.first_group(), len(self.rows)) if self.whole else self._requested
        return scale * sum(self._estimates[g] for g in groups if g not in self.converted)

    def plan(self, whole: bool, pieces: int) -> None:
        """Start fetching: the whole file in `pieces` range requests (cut at row-group boundaries once the footer
        is read; before it, at even offsets), or nothing yet (by row group: `need` asks for groups). The footer's
        bytes go into the file as soon as they are read, so any reader opens it."""
        self.whole = whole
        self.download = self._fetcher.file(self.url, self.file)
        if whole:
            self.download.add_spans(self._pieces(pieces))
            self.download.start_hashing()
        if self.metadata is not None:
            self.download.put(self._footer_start, self._footer_bytes)

    def _pieces(self, pieces: int) -> list[tuple[int, int]]:
        """[0, size) in about `pieces` ranges of equal size, cut where row groups begin when the footer says."""
        end, step = self.file.size, self.file.size / max(1, pieces)
        starts = [start for start, _ in self._bounds[1:]] if self.metadata is not None else \
            [round(step * i) for i in range(1, max(1, pieces))]
        cuts = [0]
        for start in starts:
            if start - cuts[-1] >= step * 0.99 and end - start >= step / 2:
                cuts.append(start)
        cuts.append(end)
        return list(zip(cuts, cuts[1:]))

    def span(self, group: int) -> tuple[int, int]:
        """[start, end) of the bytes converting `group` reads."""
        return self._spans[group]

    def need(self, group: int, room: float | None, scale: float) -> None:
        """By row group: fetch `group` if not yet, and the groups after it while the JSONL expected from those
        fetched and not converted stays below `room` (all of them when None), at most LOOKAHEAD_GROUPS ahead."""
        if self.whole:
            return
        wanted = [group] if group not in self._requested else []
        ahead = sum(self._estimates[g] for g in self._requested | set(wanted) if g not in self.converted)
        for g in range(group + 1, min(len(self.rows), group + 1 + LOOKAHEAD_GROUPS)):
            if g in self._requested:
                continue
            if room is not None and scale * ahead >= room:
                break
            wanted.append(g)
            ahead += self._estimates[g]
        self._requested.update(wanted)
        self.download.add_spans([self._spans[g] for g in wanted])

    def row_group_records(self) -> list[dict]:
        """What was read of a file not checked whole: each converted row group's offset, length and sha256 (of the
        bytes its conversion read)."""
        records = []
        for group in sorted(self.converted):
            start, end = self._spans[group]
            records.append({"group": group, "offset": start, "bytes": end - start,
                            "sha256": self.download.range_sha256(start, end)})
        return records

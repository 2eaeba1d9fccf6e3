"""Where the rows of each file of a Hub bootstrap's listing are: in its parts, on the Hub, or both (what
compose.head_tail reads from where), as the bootstrap's manifest records it; and a position in either.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwe_cli.loader.hub.source import HubRowPosition
from fwe_cli.loader.sources.position import Position


@dataclass(frozen=True, slots=True)
class HeadRowPosition(Position, name="head_row"):
    """Just after a row of a Hub file held in the bootstrap's parts: the part, the byte offset and line number after
    it there, and the rows of its Hub file up to it (from 1)."""

    part: int
    offset: int
    line: int
    row: int


@dataclass(frozen=True, slots=True)
class HeadTailPosition(Position, name="head_tail", version=2):
    """In listing file `file`: `at`, a HeadRowPosition in the bootstrap's parts or a HubRowPosition on the Hub."""

    file: int
    at: Position

    def check(self) -> None:
        Position.check(self)  # (a slotted dataclass's methods cannot call super() bare)
        if not isinstance(self.at, (HeadRowPosition, HubRowPosition)):
            raise ValueError(f"at must be a head_row or hub_row position, got {self.at.name}")


def where_rows_are(manifest: dict, parts: int) -> tuple[object, dict, dict]:
    """(the listing the bootstrap read, `local`, `hub_from`) from its manifest (`parts`: how many parts it has):
    `local[file]` is the (start, end) of a listing file's rows in the parts, each a (part, offset, line) position;
    `hub_from[file]` the (row group, row) its Hub rows begin at, or None when the parts hold it whole."""
    from fwe_cli.loader.hub.listing import HubFile, HubListing

    listing = HubListing(manifest["dataset"], manifest["config"], manifest["split"], manifest["revision"],
                         tuple(HubFile(f["path"], f["bytes"], f.get("sha256")) for f in manifest["hub_listing"]))
    held = sorted((f["index"], tuple(f["first"][k] for k in ("part", "offset", "line")))
                  for f in manifest["hub_files"] if isinstance(f.get("first"), dict))
    stop = manifest.get("hub_next")
    local: dict[int, tuple[tuple, tuple]] = {}
    for (index, first), following in zip(held, held[1:] + [(None, (parts, 0, 0))]):
        local[index] = (first, following[1])
    hub_from: dict[int, tuple[int, int] | None] = {}
    for index in range(len(listing.files)):
        if stop is not None and index == stop["file"]:
            hub_from[index] = (stop["group"], stop["row"])
        elif index in local:
            hub_from[index] = None  # held whole (a node's bootstrap holds only its files: the others are the Hub's
        else:                       # from their start, as are the files after where it stopped)
            hub_from[index] = (0, 0)
    return listing, local, hub_from

"""A Hub listing's parquet footers, where they are needed before a reader reads: the units of a listing filtered by
--where (the row groups its statistics do not rule out are dealt; sources.units), and where a file's rows lie in its
bytes (a bootstrap's rows served from its parts are anchored where their Hub rows are: compose.head_tail). Footers
come from the head cache, else from the Hub, and are kept there.
"""

from __future__ import annotations

from fwe_cli.loader.hub.head_cache import HeadCache
from fwe_cli.loader.hub.listing import HubFile, HubListing
from fwe_cli.loader.hub.ranges import fetch_range, parquet_footer
from fwe_cli.loader.remote.hub_env import resolve_url
from fwe_cli.loader.sources.units import RowGroups, Unit
from fwe_cli.loader.sources.where import Filtered


def hub_units(listing: HubListing, head: HeadCache | None, filtered: Filtered | None) -> list[Unit]:
    """The units of a listing (sources.units): a file each, from the listing's sizes; with a row filter, each row
    group its footer's statistics do not rule out (the others counted in `filtered`, read by no reader), the footers
    read now (from the head cache when kept there)."""
    if filtered is None:
        return [Unit(number, 0, file.size) for number, file in enumerate(listing.files)]
    units = []
    for number, file in enumerate(listing.files):
        metadata = file_footer(listing, number, head)
        groups = RowGroups.of(metadata, file.size)
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            if filtered.where.may_match(row_group):
                units.append(Unit(number, *groups.extent(group)))
            else:  # ruled out before it is dealt: no reader reads it, and the readers share the rest evenly
                filtered.skip_row_group(row_group.num_rows)
    return units


def file_rows(listing: HubListing, number: int, head: HeadCache | None) -> RowGroups:
    """Where listing file `number`'s rows lie in its bytes (its footer's row groups)."""
    return RowGroups.of(file_footer(listing, number, head, fail_fast=True), listing.files[number].size)


def file_footer(listing: HubListing, number: int, head: HeadCache | None, fail_fast: bool = False):
    """The parquet metadata of listing file `number`: its footer from the head cache, else fetched and kept there."""
    def read(url: str, file: HubFile, start: int, end: int) -> bytes:
        data = head.get(file.path, start, end) if head is not None else None
        if data is None:
            data = fetch_range(url, start, end, fail_fast)
            if head is not None:
                head.put(file.path, start, data)
        return data

    file = listing.files[number]
    return parquet_footer(resolve_url(listing.repo, listing.revision, file.path), file, read)[0]

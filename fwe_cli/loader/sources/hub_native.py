"""The Hub read natively (--hub-reader native, the default): the config's parquet files listed as `datasets` lists
them (hub_listing, cached), then their rows through HTTP range reads on a read-ahead thread (hub_parquet), the stream's
first row groups and footers kept in a head cache (hub_head_cache) so a warm start makes one request before its first
batch. Same documents in the same order as `datasets` streaming; resumes at a row without reading what came before.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from typing import Callable, Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.base import Order
from fwe_cli.loader.sources.hub_source import HubSource, iter_hub


class HubNative(HubSource):
    """Range reads of the listing's parquet files; `fwe bootstrap` downloads the files whole instead."""

    copies_whole_files = True
    lists_hub_files = True

    @classmethod
    def accepts(cls, spec) -> bool:
        return spec.hub_reader == "native"

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self.listing = None
        """The HubListing, once resolved (the commit read, its files)."""
        self.head = None
        """The HeadCache, when the cache is used."""
        self._reader = None  # the HubParquetReader of the epoch being read
        self._warm = False

    def prepare(self) -> None:
        import urllib.request  # noqa: F401  the warm start's one request (a HEAD) goes out through it

    def open(self, set_stage: Callable[[str], None]) -> None:
        """List the config's parquet files (cached; once)."""
        if self.listing is not None:
            return
        from fwe_cli.loader.sources.hub_head_cache import HeadCache
        from fwe_cli.loader.sources.hub_listing import listed_before, listing_stage, resolve_listing

        spec, cached = self.spec, self.options.use_cache
        # pyarrow is slow to import: a first start imports it while the listing waits on the network; a warm one
        # only when its head cache does not hold the first row group (the reader imports it once needed)
        self._warm = cached and listed_before(spec.dataset, spec.revision)
        if not self._warm:
            import_in_background("pyarrow.parquet")
        set_stage(listing_stage(spec.dataset, spec.name))
        self.listing = resolve_listing(spec.dataset, spec.name, spec.split, spec.revision, use_cache=cached,
                                       set_stage=set_stage)
        self.revision, self.files = self.listing.revision, [f.path for f in self.listing.files]
        self.head = HeadCache(self.listing) if cached else None

    def documents(self, epoch: int, at: tuple | None, order: Order) -> Iterator[tuple[Document, tuple]]:
        """The rows of the epoch's files in `datasets` order (or the epoch's shuffled one) from `at`; the read-ahead
        thread of the previous epoch's reader is stopped."""
        from fwe_cli.loader.sources.hub_parquet import HubParquetReader, iter_rows

        listing = dataclasses.replace(self.listing, files=tuple(order(list(self.listing.files), epoch)))
        if self._reader is not None:
            self._reader.close()
        self._reader = HubParquetReader(listing, head=self.head, start=at or (0, 0, 0))
        if self._warm and not self._reader.starts_from_cache():
            import_in_background("pyarrow.parquet")
        self._warm = True  # later epochs: pyarrow is loaded by now
        return iter_hub(iter_rows(self._reader), self.spec.dataset, self.bad, self.options.strict)

    def read_ahead_now(self) -> None:
        if self._reader is not None:
            self._reader.read_ahead_now()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    def describe(self) -> dict:
        info = dict(super().describe(), files=len(self.files))
        if self.head is not None:
            info["head_cache"] = {"hits": self.head.hits, "stored": self.head.stored}
        return info


def import_in_background(module: str) -> None:
    """Import `module` on a named daemon thread (a slow import overlaps the network waits of the caller's thread)."""
    threading.Thread(target=importlib.import_module, args=(module,), name=f"fwe-import-{module.split('.')[0]}",
                     daemon=True).start()

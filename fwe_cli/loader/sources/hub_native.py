"""The Hub read natively (--hub-reader native, the default): the config's parquet files listed as `datasets` lists
them (hub_listing, cached), then their rows through HTTP range reads on a read-ahead thread (hub_parquet), the stream's
first row groups and footers kept in a head cache (hub_head_cache) so a warm start makes one request before its first
batch. Same documents in the same order as `datasets` streaming; resumes at a row without reading what came before.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from concurrent.futures import Future
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
        self._first = None  # the kept first batches (first_batches)
        self._listing: Future | None = None  # the listing being resolved (prepare)
        self._stage: Callable[[str], None] = lambda stage: None  # the loader's stage, once open() is called
        self._said: str | None = None  # the listing thread's latest stage (a wait on another rank's listing)
        self._saying = threading.Lock()

    def prepare(self) -> None:
        """Start resolving the listing now, on its own thread (`fwe-hub-listing`): a warm start's one request (a HEAD)
        goes out before the pipeline starts parsing a tokenizer, which holds the GIL, and a cold start's listing
        overlaps the tokenizer's download and parse."""
        if self._listing is not None:
            return
        from fwe_cli.loader.sources.hub_listing import listed_before, resolve_listing

        spec, cached = self.spec, self.options.use_cache
        # pyarrow is slow to import: a first start imports it while the listing waits on the network; a warm one
        # only when its head cache does not hold the first row group (the reader imports it once needed)
        self._warm = cached and listed_before(spec.dataset, spec.revision)
        if not self._warm:
            import_in_background("pyarrow.parquet")
        self._listing = Future()

        def resolve() -> None:
            try:
                self._listing.set_result(resolve_listing(spec.dataset, spec.name, spec.split, spec.revision,
                                                         use_cache=cached, set_stage=self._say))
            except BaseException as exc:  # noqa: BLE001 - raised by open(), in the producer
                self._listing.set_exception(exc)

        threading.Thread(target=resolve, name="fwe-hub-listing", daemon=True).start()

    def open(self, set_stage: Callable[[str], None]) -> None:
        """The config's parquet files, listed (cached; once): waits for what prepare() started."""
        if self.listing is not None:
            return
        from fwe_cli.loader.sources.hub_head_cache import HeadCache
        from fwe_cli.loader.sources.hub_listing import listing_stage

        with self._saying:  # what the listing thread said before open() (waiting on a lock) is the stage now
            self._stage = set_stage
            set_stage(self._said or listing_stage(self.spec.dataset, self.spec.name))
        self.prepare()
        self.listing = self._listing.result()
        self.revision, self.files = self.listing.revision, [f.path for f in self.listing.files]
        self.head = HeadCache(self.listing) if self.options.use_cache else None

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

    def _say(self, stage: str) -> None:
        """The listing thread's stage: the loader's once open() was called, kept for it until then."""
        with self._saying:
            self._said = stage
            self._stage(stage)

    def first_batches(self, config, tokenizer: str):
        """The first batches earlier runs kept for this stream (hub_first_batches), or None when none can be: what
        the pipeline replays when the listing confirms their commit, and where it keeps a run's own."""
        from fwe_cli.loader.sources.hub_first_batches import FirstBatches

        first = FirstBatches(config, tokenizer)
        self._first = first if first.usable else None
        return self._first

    def read_ahead_now(self) -> None:
        if self._first is not None:
            self._first.more()
        if self._reader is not None:
            self._reader.read_ahead_now()

    def close(self) -> None:
        if self._first is not None:
            self._first.more()  # a producer waiting after the kept batches goes on (and ends) at once
            self._first.settle()
        if self._reader is not None:
            self._reader.close()

    def describe(self) -> dict:
        info = dict(super().describe(), files=len(self.files))
        if self.head is not None:
            info["head_cache"] = {"hits": self.head.hits, "stored": self.head.stored}
        if self._first is not None:
            info["first_batches"] = self._first.describe()
        return info


def import_in_background(module: str) -> None:
    """Import `module` on a named daemon thread (a slow import overlaps the network waits of the caller's thread)."""
    threading.Thread(target=importlib.import_module, args=(module,), name=f"fwe-import-{module.split('.')[0]}",
                     daemon=True).start()

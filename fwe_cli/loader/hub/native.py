"""The Hub read natively (--hub-reader native, the default): the config's parquet files listed as `datasets` lists
them (hub.listing, cached), then their rows through HTTP range reads on a read-ahead thread (hub.readahead), the stream's
first row groups and footers kept in a head cache (hub.head_cache) so a warm start makes one request before its first
batch. Same documents in the same order as `datasets` streaming; resumes at a row without reading what came before.

The listing is resolved on its own thread from the moment the loader starts (prepare), or earlier: the `fwe` process
starts it as soon as a command's words say where the data is (HubNative.start_early), before it has imported what the
run needs, and the loader's source takes it over.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.flow.in_background import InBackground, import_in_background
from fwe_cli.loader.hub.source import HubRowPosition, HubSource, iter_hub
from fwe_cli.loader.remote.transient import current_scope, scoped, work_scope
from fwe_cli.loader.sources.units import Piece, Unit


class HubNative(HubSource):
    """Range reads of the listing's parquet files; `fwe bootstrap` downloads the files whole instead."""

    copies_whole_files = True
    lists_hub_files = True
    position_type = HubRowPosition

    @classmethod
    def reads_spec(cls, spec) -> bool:
        return spec.options.hub_reader == "native"

    @classmethod
    def start_early(cls, spec, options) -> None:
        """Before the loader exists (the `fwe` process, while it imports what the run needs): the listing starts now
        (a warm start's one request, the HEAD that says whether the branch still points at the cached listing; a
        cold start's requests for the files, its connections and its parquet decoder's import), taken over by the
        next HubNative of the same stream, cache and endpoint (one, once), which waits for it under its own deadline
        and stage. Offline (HF_HUB_OFFLINE=1), nothing."""
        from fwe_cli.loader.remote.hub_env import offline

        global _early
        if offline():
            return
        started = Listing(spec, options.hub_cache)
        with _early_lock:
            _early = started

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self.listing = None
        """The HubListing, once resolved (the commit read, its files)."""
        self.head = None
        """The HeadCache, when the cache is used."""
        self._reader = None  # the HubParquetReader of the epoch being read
        self._warm = False
        self._first = None  # the kept first batches (first_batches)
        self._listing: Listing | None = None  # the listing being resolved (prepare)
        self._units = None
        self.fetched = 0
        """Bytes of row groups fetched from the Hub by readers closed so far (footers apart)."""

    def prepare(self) -> None:
        """Start resolving the listing now, on its own thread (`fwe-hub-listing`), unless `start_early` has: a warm
        start's one request (a HEAD) goes out before the pipeline starts parsing a tokenizer, which holds the GIL,
        and a cold start's listing overlaps the tokenizer's download and parse."""
        global _early
        if self._listing is not None:
            return
        with _early_lock:
            early, _early = _early, None
        if early is not None and early.key == _key(self.spec, self.options.hub_cache):
            early.retries.hand_to(current_scope())  # its retries are this loader's, within its budget
            self._listing = early
        else:
            self._listing = Listing(self.spec, self.options.hub_cache)
        self._warm = self._listing.warm

    def open(self, set_stage: Callable[[str], None]) -> None:
        """The config's parquet files, listed (cached; once): waits for what prepare() started."""
        if self.listing is not None:
            return
        from fwe_cli.loader.hub.head_cache import HeadCache

        self.prepare()
        self.listing = self._listing.result(set_stage)
        self.revision, self.files = self.listing.revision, [f.path for f in self.listing.files]
        self.head = HeadCache(self.listing) if self.options.hub_cache else None

    def units(self) -> list[Unit]:
        """A unit per file of the listing (its size is known from the listing), or with a row filter one per row
        group its statistics do not rule out (the footers read once, kept in the head cache)."""
        from fwe_cli.loader.hub.footers import hub_units

        if self._units is None:
            self._units = hub_units(self.listing, self.head, self.filtered)
        return self._units

    def read(self, pieces: list[Piece], at: HubRowPosition | None) -> Iterator[tuple[Document, HubRowPosition, int]]:
        """The rows of the pieces (in `datasets` order for a fresh unsharded stream); the read-ahead thread of the
        previous span's reader is stopped."""
        from fwe_cli.loader.hub.readahead import HubParquetReader, iter_rows

        if self._reader is not None:
            self.fetched += self._reader.fetched
            self._reader.close()
        self._reader = HubParquetReader(self.listing, pieces, at, head=self.head, filtered=self.filtered)
        if self._warm and not self._reader.starts_from_cache():
            import_in_background("pyarrow.parquet")
        self._warm = True  # later spans: pyarrow is loaded by now
        return iter_hub(iter_rows(self._reader), self.spec.options.dataset, self.bad, self.options.strict,
                        filtered=self.filtered)

    def first_batches(self, config, tokenizer: str):
        """The first batches earlier runs kept for this stream (hub.first_batches), or None when none can be: what
        the pipeline replays when the listing confirms their commit, and where it keeps a run's own."""
        from fwe_cli.loader.hub.first_batches import FirstBatches

        first = FirstBatches(config, tokenizer, self)
        self._first = first if first.usable else None
        return self._first

    def read_ahead_now(self) -> None:
        if self._first is not None:
            self._first.consumer_wants_more()
        if self._reader is not None:
            self._reader.read_ahead_now()

    def close(self) -> None:
        if self._first is not None:
            self._first.consumer_wants_more()  # a producer waiting after the kept batches goes on (and ends) at once
        if self._reader is not None:
            self._reader.close()

    def wait_for_writes(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for this run's kept first batches to be written (the loader closes: the
        next start may read them); True when none is left to write."""
        return self._first is None or self._first.wait_for_writes(timeout)

    def describe(self) -> dict:
        fetched = self.fetched + (self._reader.fetched if self._reader is not None else 0)
        info = dict(super().describe(), files=len(self.files), fetched_bytes=fetched)
        if self.head is not None:
            info["head_cache"] = {"hits": self.head.hits, "stored": self.head.stored}
        if self._first is not None:
            info["first_batches"] = self._first.describe()
        return info


def _key(spec, use_cache: bool) -> tuple:
    """What a listing depends on: the stream, the cache's use, and where the Hub and the cache are."""
    from fwe_cli.loader.remote.hub_env import endpoint, hub_cache_dir

    o = spec.options
    return o.dataset, o.name, o.split, o.revision, use_cache, endpoint(), hub_cache_dir()


class Listing:
    """A listing being resolved on its own thread (`fwe-hub-listing`), started now. `warm`: this cache listed the
    stream before (pyarrow, slow to import, is imported beside it only when not: a warm start imports it only once
    its head cache runs out). What the thread says it waits on (another rank's listing) before anyone follows it is
    kept and said to the first to follow (`result`). When the Hub is asked for the files, the first file's footer is
    read beside the request for their sizes (FooterAhead), on a second connection opened meanwhile. Its requests
    retry in its creator's scope (a loader's), or, started before any loader, in `retries` of its own, which the
    loader that takes it over adopts (transient.RetryScope)."""

    def __init__(self, spec, use_cache: bool):
        from fwe_cli.loader.hub.listing import listed_before, resolve_listing
        from fwe_cli.loader.remote.http import preconnect
        from fwe_cli.loader.remote.hub_env import endpoint, offline

        o = spec.options
        self.key = _key(spec, use_cache)
        self.retries = work_scope()
        self.warm = use_cache and listed_before(o.dataset, o.revision)
        self._said: str | None = None
        self._stage: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._where = (o.dataset, o.name)
        footer = None
        if not self.warm and not offline():  # a first listing: two connections (a warm one needs only its HEAD's)
            preconnect(endpoint(), COLD_CONNECTIONS)
            footer = FooterAhead(o.dataset) if use_cache else None

        def resolve():
            listing = resolve_listing(o.dataset, o.name, o.split, o.revision, use_cache=use_cache,
                                      set_stage=self._report_stage, first_file=footer and footer.start)
            if footer is not None:
                footer.keep(listing)
            return listing

        with scoped(self.retries):  # its error is raised by result(), in the producer
            self._resolving = InBackground(resolve, "fwe-hub-listing")
        if not self.warm:  # after the listing's thread starts: its first request need not wait for the GIL
            import_in_background("pyarrow.parquet")

    def _report_stage(self, stage: str) -> None:
        with self._lock:
            self._said = stage
            if self._stage is not None:
                self._stage(stage)

    def result(self, set_stage: Callable[[str], None]):
        """The HubListing, waited for; `set_stage` names what the listing does meanwhile (its error is raised)."""
        from fwe_cli.loader.hub.listing import listing_stage

        with self._lock:  # what the thread said before (waiting on a lock) is the stage now
            self._stage = set_stage
            set_stage(self._said or listing_stage(*self._where))
        return self._resolving.result()


class FooterAhead:
    """The first file's footer (its last FOOTER_PROBE bytes, the reader's first read of it), asked for as soon as a
    cold listing knows the file's name and commit, on its own thread beside the listing's request for the sizes (a
    suffix range needs no size; the listing opened a connection for it), and kept in the head cache once the
    listing confirms the file and its size: the reader finds it there, and a cold start's path to its first row
    group is one round trip shorter. A read that fails, or is not done FOOTER_WAIT_S after the listing, only leaves
    the reader to make it (and to report what goes wrong)."""

    def __init__(self, repo: str):
        self._repo = repo
        self._thread: threading.Thread | None = None
        self._read: tuple | None = None  # (path, first byte, file size, bytes)

    def start(self, sha: str, path: str) -> None:
        from fwe_cli.loader.remote.hub_env import resolve_url

        url = resolve_url(self._repo, sha, path)
        self._thread = threading.Thread(target=self._fetch, args=(url, path), name="fwe-hub-footer", daemon=True)
        self._thread.start()

    def _fetch(self, url: str, path: str) -> None:
        import re

        from fwe_cli.loader.hub.ranges import FOOTER_PROBE, REQUEST_TIMEOUT_S
        from fwe_cli.loader.remote.hub_get import get

        try:
            with get(url, {"Range": f"bytes=-{FOOTER_PROBE}"}, timeout=REQUEST_TIMEOUT_S) as answer:
                data = answer.read()
                span = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", answer.headers.get("content-range", ""))
                whole = answer.status == 206 and span is not None
            if whole and int(span[1]) + len(data) == int(span[2]) + 1 == int(span[3]):
                self._read = (path, int(span[1]), int(span[3]), data)
        except Exception:  # noqa: BLE001 - the reader makes this read itself, and reports its failure
            pass

    def keep(self, listing) -> None:
        """Wait (FOOTER_WAIT_S at most) for the read; keep its bytes in the listing's head cache when they are its
        first file's, whole."""
        from fwe_cli.loader.hub.head_cache import HeadCache

        if self._thread is None:
            return
        self._thread.join(FOOTER_WAIT_S)
        read, first = self._read, listing.files[0] if listing.files else None
        if read is not None and first is not None and (read[0], read[2]) == (first.path, first.size):
            HeadCache(listing).put(first.path, read[1], read[3])


COLD_CONNECTIONS = 2  # a cold listing's requests, and the footer read beside the second (opened before either)
FOOTER_WAIT_S = 3.0  # how long a listing waits for the footer read beside it (hub.api.OPEN_TIMEOUT_S)
_early: Listing | None = None  # started by start_early, taken by the next prepare()
_early_lock = threading.Lock()


"""Document sources: one entry point, `DocumentStream`, that opens the configured source and orders, shuffles and
shards its documents (sources.order), from the start or from a saved position."""

from __future__ import annotations

import dataclasses
import importlib
import threading
from typing import TYPE_CHECKING, Callable, Iterator

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.hub import iter_hub
from fwe_cli.loader.sources.local import BadRecords, iter_local, resolve_files
from fwe_cli.loader.sources.order import ordered, permuted

if TYPE_CHECKING:  # token_dir (numpy) loads when a run reads a local path: `fwe --help` imports no numpy
    import numpy as np

    from fwe_cli.loader.sources.token_dir import ShardTokens


class DocumentStream:
    """The shard's documents for a config, in stream order, plus what was learned while reading.

    Opening (file listing, Hub handshake) happens on first iteration, inside the producer, so its cost is
    measured as part of the first batch and a hang there is caught by the loader's timeout.
    """

    def __init__(self, config: LoaderConfig, set_stage: Callable[[str], None] = lambda stage: None,
                 mark: Callable[[str], None] = lambda name: None, start: dict | None = None,
                 expect_files: list[str] | None = None):
        self.config = config
        self.start = start
        """A document's `resume`: the stream yields that document first (None: from the start)."""
        self.expect_files = expect_files
        """For a resumed local stream: the files its positions were saved over."""
        self._listing = None  # the native reader's HubListing, once resolved
        self._mark = mark
        self.bad = BadRecords()
        self.files: list[str] = []
        self.revision: str | None = None  # the Hub commit read (native reader)
        self.head = None  # the native reader's HeadCache, when used
        self._reader = None  # the native reader's HubParquetReader, once opened
        self._set_stage = set_stage
        self.tokens = None  # a token directory's ShardTokens, once `pretokenized` has found one

    def describe(self) -> dict:
        c = self.config
        info: dict = {"kind": c.source}
        if c.source == "local":
            info.update(path=c.local_path, files=len(self.files), bad_records=self.bad.to_dict())
            if self.tokens is not None:
                info["format"] = "fwe-tokens/1"
        elif c.source == "hub":
            info.update(dataset=c.dataset, name=c.name, split=c.split, reader=c.hub_reader,
                        revision=self.revision or c.revision, bad_records=self.bad.to_dict())
            if c.hub_reader == "native":
                info["files"] = len(self.files)
            if self.head is not None:
                info["head_cache"] = {"hits": self.head.hits, "stored": self.head.stored}
        else:
            info.update(seed=c.seed)
        return info

    def __iter__(self) -> Iterator[Document]:
        c = self.config
        seed = c.shuffle_seed
        for doc in ordered(self._open_at, c.shard, c.epochs, seed, c.shuffle_window, self.start):
            self._mark("first_document")
            yield doc

    def _open_at(self, epoch: int, at: tuple | None) -> Iterator[tuple[Document, tuple]]:
        """(document, position after it) of the whole stream in epoch `epoch`'s file order, from position `at`."""
        c = self.config
        strict = c.bad_records == "error"
        if c.source == "synthetic":
            from fwe_cli.loader.sources.synthetic import iter_synthetic  # numpy: only runs that use it pay for it

            first = at[0] if at else 0
            docs = ((doc, (first + i + 1,)) for i, doc in enumerate(iter_synthetic(c.seed, start=first)))
        elif c.source == "local":
            self._list_local()
            if self.tokens is not None:
                from fwe_cli.loader.sources.token_dir import iter_token_docs

                docs = iter_token_docs(self._epoch_order(self.files, epoch), self.tokens, at)
            else:
                docs = iter_local(self._epoch_order(self.files, epoch), self.bad, strict, at)
        elif c.hub_reader == "native":
            docs = iter_hub(self._open_native(epoch, at), c.dataset, self.bad, strict)
        else:
            from fwe_cli.loader.sources.hub import datasets_rows, open_hub_stream

            self._set_stage(f"opening source (Hub handshake, metadata and file listing for {c.dataset})")
            stream = open_hub_stream(c.dataset, c.name, c.split, c.revision)
            rows = at[0] if at else 0
            docs = iter_hub(datasets_rows(stream, rows), c.dataset, self.bad, strict, counted=rows)
        self._mark("source_opened")
        self._set_stage("reading first document")
        return docs

    def _list_local(self) -> None:
        if self.files:
            return
        c = self.config
        hashing = ", hashing bootstrap parts" if c.verify_parts else ""
        self._set_stage(f"opening source (listing local files{hashing})")
        if self.tokens is not None:
            from fwe_cli.loader.sources.token_dir import resolve_shards

            self.files = resolve_shards(self.tokens, allow_partial=c.allow_partial, verify_parts=c.verify_parts)
        else:
            self.files = resolve_files(c.local_path, allow_partial=c.allow_partial, verify_parts=c.verify_parts)
        self._check_files()

    def pretokenized(self) -> ShardTokens | None:
        """For a token directory (fwe tokenize's output): its ShardTokens (eos id and vocab size from the manifest,
        no tokenizer loaded), after checking that the config's tokenizer is the one the shards were made with."""
        c = self.config
        if c.source != "local" or self.tokens is not None:
            return self.tokens
        from fwe_cli.loader.sources.token_dir import ShardTokens, token_manifest

        manifest = token_manifest(c.local_path)
        if manifest is not None:
            tokens = ShardTokens(c.local_path, manifest)
            tokens.check(c.tokenizer)
            self.tokens = tokens
        return self.tokens

    def in_order(self) -> bool:
        """Whether every document is read, in file order (one shard, no shuffle): a token directory's stream is
        then served by `token_chunks`."""
        return self.config.shard.mod == 1 and self.config.shuffle_seed is None

    def token_chunks(self, sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, dict, int]]:
        """A token directory read in order: (ids, first document's `resume`, documents) per chunk of about
        `next(sizes)` tokens, over the epochs, from `start` (see token_dir.iter_token_chunks)."""
        from fwe_cli.loader.sources.token_dir import iter_token_chunks

        self._list_local()
        self._mark("source_opened")
        start = self.start or {}
        for epoch in range(int(start.get("epoch", 0)), self.config.epochs):
            first = start if epoch == int(start.get("epoch", 0)) else None
            for chunk in iter_token_chunks(self.files, self.tokens, epoch, first, sizes):
                self._mark("first_document")
                yield chunk

    def _epoch_order(self, files: list, epoch: int) -> list:
        """The files in epoch `epoch`'s order: as listed, or permuted by (shuffle seed, epoch)."""
        seed = self.config.shuffle_seed
        return files if seed is None else permuted(files, "files", seed, epoch)

    def _check_files(self) -> None:
        """A resumed stream reads the files its state was saved over (positions name files by number)."""
        if self.expect_files is not None and self.expect_files != self.files:
            raise ConfigError(f"the resume state was saved over {len(self.expect_files)} files of "
                              f"{self.config.local_path!r}, which now gives {len(self.files)} (or other ones): "
                              "resume over the same files, or start without the state")

    def _open_native(self, epoch: int, at: tuple | None) -> Iterator[tuple[dict, tuple]]:
        """List the config's parquet files (cached; once per stream), then their rows through range reads (see
        hub_parquet), files in `datasets` order (or the epoch's shuffled one); the reader's thread stops when the
        rows are closed or collected."""
        from fwe_cli.loader.sources.hub_head_cache import HeadCache
        from fwe_cli.loader.sources.hub_listing import listed_before, resolve_listing
        from fwe_cli.loader.sources.hub_parquet import HubParquetReader, iter_rows

        c = self.config
        if self._listing is None:
            # pyarrow is slow to import: a first start imports it while the listing waits on the network; a warm
            # one only when its head cache does not hold the first row group (the reader imports it once needed)
            warm = c.hub_cache and listed_before(c.dataset, c.revision)
            if not warm:
                _import_in_background("pyarrow.parquet")
            self._set_stage(f"opening source (Hub file listing of {c.dataset}, config {c.name})")
            self._listing = resolve_listing(c.dataset, c.name, c.split, c.revision, use_cache=c.hub_cache)
            self.revision, self.files = self._listing.revision, [f.path for f in self._listing.files]
            self.head = HeadCache(self._listing) if c.hub_cache else None
        else:
            warm = True
        listing = dataclasses.replace(self._listing, files=tuple(self._epoch_order(list(self._listing.files), epoch)))
        if self._reader is not None:
            self._reader.close()
        self._reader = HubParquetReader(listing, head=self.head, start=at or (0, 0, 0))
        if warm and not self._reader.starts_from_cache():
            _import_in_background("pyarrow.parquet")
        return iter_rows(self._reader)

    def prepare(self) -> None:
        """Imports the source's first request needs, done before the pipeline starts loading the tokenizer: parsing
        a tokenizer.json holds the GIL throughout, so a request that is not yet on the wire when it starts waits
        for it, and a warm Hub start's one request (a HEAD, sent with urllib) would then come after the parse
        instead of beside it."""
        if self.config.source == "hub" and self.config.hub_reader == "native":
            import urllib.request  # noqa: F401

    def read_ahead_now(self) -> None:
        """The consumer has taken its first batch and wants more: background reads may run ahead now (the native
        reader holds back, until then, all work past its head cache that nothing waits for)."""
        if self._reader is not None:
            self._reader.read_ahead_now()

    def close(self) -> None:
        """Stop background reads (the native reader's read-ahead); callable from any thread, more than once."""
        if self._reader is not None:
            self._reader.close()


def _import_in_background(module: str) -> None:
    threading.Thread(target=importlib.import_module, args=(module,), name=f"fwe-import-{module.split('.')[0]}",
                     daemon=True).start()

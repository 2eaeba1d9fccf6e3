"""`DocumentStream`: the shard's documents for a loader config, in stream order — the configured source (opened
through the registry) ordered, shuffled and sharded by sources.order, from the start or from a saved position.

    stream = DocumentStream(config)
    for doc in stream: ...            # Documents with `resume` set: DocumentStream(config, start=doc.resume)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.loader.sources.order import StreamOrder, ordered, permuted
from fwe_cli.loader.sources.registry import open_source

if TYPE_CHECKING:
    import numpy as np

    from fwe_cli.loader.config import LoaderConfig
    from fwe_cli.loader.elastic import ElasticPlan
    from fwe_cli.loader.sources.base import Source
    from fwe_cli.loader.sources.position import Position
    from fwe_cli.loader.sources.token_manifest import ShardTokens


class DocumentStream:
    """The shard's documents for a config, in stream order, plus what was learned while reading.

    Opening (which reader a local path needs, the file listing, the Hub handshake) happens on first use, inside the
    producer, so its cost is measured as part of the first batch and a hang there is caught by the loader's timeout.
    """

    def __init__(self, config: LoaderConfig, set_stage: Callable[[str], None] = lambda stage: None,
                 mark: Callable[[str], None] = lambda name: None, start: dict | None = None,
                 expect: dict | None = None, bad: BadRecords | None = None, plan: ElasticPlan | None = None):
        self.config = config
        self.start = start
        """A document's `resume`: the stream yields that document first (None: from the start)."""
        self.expect = expect
        """For a resumed stream: the files its positions were saved over (Source.fingerprint_tree), checked on
        open."""
        self._set_stage = set_stage
        self._mark = mark
        self._bad = bad
        self.plan = plan
        """Which documents are the shard's after a change of world size (loader.elastic); None: i % mod == rem."""
        self._source: Source | None = None

    @property
    def source(self) -> Source:
        """The object reading the configured source (created on first use: for a local path it looks at the disk)."""
        if self._source is None:
            self._source = open_source(self.config.source, self.config.read_options())
            if self._bad is not None:  # a resumed run goes on counting from the bad records it had met
                self._source.bad = self._bad
        return self._source

    @property
    def bad(self) -> BadRecords:
        """Malformed records met so far (the source's count)."""
        return self.source.bad

    @property
    def opened(self) -> Source | None:
        """The source if it has been created (never creates it: safe from the consumer thread)."""
        return self._source

    def describe(self) -> dict:
        if self._source is None:
            return {**self.config.source.to_json(), "opened": False}
        return self._source.describe()

    def __iter__(self) -> Iterator[Document]:
        c = self.config
        start = self.start
        if start and start.get("at") is not None:  # typed and checked as the source opens, before the first read
            start = dict(start, at=self._typed(self._open(), start["at"]))
        if self.source.orders_children:  # a mixture: each child ordered and sharded on its own, then mixed
            order = StreamOrder(c.shard, c.epochs, c.shuffle_seed, c.shuffle_window, self._epoch_order, self.plan)
            docs = self._open().ordered(order, start)
        else:
            docs = ordered(self._open_at, c.shard, c.epochs, c.shuffle_seed, c.shuffle_window, start, self.plan)
        for doc in docs:
            self._mark("first_document")
            yield doc

    def _open(self) -> Source:
        source = self.source
        source.open(self._set_stage)
        if self.expect is not None:
            source.check_fingerprints(self.expect)
            self.expect = None
        return source

    def _open_at(self, epoch: int, at: Position | None) -> Iterator[tuple[Document, Position]]:
        """(document, position after it) of the whole stream in epoch `epoch`'s file order, from position `at`."""
        source = self._open()
        docs = source.documents(epoch, at, self._epoch_order)
        self._mark("source_opened")
        self._set_stage("reading first document")
        return docs

    @staticmethod
    def _typed(source: Source, at: Position | list | None) -> Position | None:
        """A resume position checked to be `source`'s (one an fwe before typed positions saved, a list, read by the
        source itself)."""
        if isinstance(at, list):
            at = source.legacy_position(at)
        source.check_position(at)
        return at

    def _epoch_order(self, files: list, epoch: int) -> list:
        """The files in epoch `epoch`'s order: as listed, or permuted by (shuffle seed, epoch)."""
        seed = self.config.shuffle_seed
        return files if seed is None else permuted(files, "files", seed, epoch)

    def pretokenized(self) -> ShardTokens | None:
        """For a token directory (fwe tokenize's output): its ShardTokens (eos id and vocab size from the manifest,
        no tokenizer loaded), after checking that the config's tokenizer is the one the shards were made with."""
        return self.source.pretokenized()

    def tokenizer(self) -> str:
        """The tokenizer the documents are encoded with: the config's, else the source's own."""
        return self.config.tokenizer or self.source.default_tokenizer()

    def in_order(self) -> bool:
        """Whether every document is read, in file order (one shard, no shuffle, no world change): a token
        directory's stream is then served by `token_chunks`."""
        return self.config.shard.mod == 1 and self.config.shuffle_seed is None and self.plan is None

    def token_chunks(self, sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, dict, np.ndarray]] | None:
        """For a source that reads token chunks (a token directory) and a stream read in order: (ids, first
        document's `resume`, each document's tokens) per chunk of about `next(sizes)` tokens, over the epochs, from
        `start` (see token_dir.iter_token_chunks); None for any other."""
        if not self.in_order():
            return None
        source = self._open()
        start = self.start or {}
        if start:
            start = dict(start, at=self._typed(source, start.get("at")))
        first_epoch = int(start.get("epoch", 0))
        epochs = [source.token_chunks(epoch, start if epoch == first_epoch else None, sizes)
                  for epoch in range(first_epoch, self.config.epochs)]
        if any(chunks is None for chunks in epochs):
            return None
        self._mark("source_opened")
        return self._chunks(epochs)

    def _chunks(self, epochs: list[Iterator]) -> Iterator[tuple[np.ndarray, dict, np.ndarray]]:
        for chunks in epochs:
            for chunk in chunks:
                self._mark("first_document")
                yield chunk

    def first_batches(self, tokenizer: str):
        """The kept first batches of a fresh, unsharded-in-time stream (Source.first_batches), or None: only for a
        stream that starts at its beginning under no change of world size."""
        if self.start is not None or self.plan is not None:
            return None
        return self.source.first_batches(self.config, tokenizer)

    def prepare(self) -> None:
        """What the source's first request needs, done before the pipeline starts loading the tokenizer."""
        self.source.prepare()

    def read_ahead_now(self) -> None:
        """The consumer has taken its first batch and wants more: background reads may run ahead now."""
        if self._source is not None:
            self._source.read_ahead_now()

    def figures(self, docs: int, tokens: int) -> dict:
        """What the stats say of the source's parts: "parts" (a source of several segments, or None) and "sources"
        (what came from each source: its weight, documents and tokens; for a single source, one entry of the
        `docs` and `tokens` the pipeline read)."""
        figures = self._source.figures() if self._source is not None else {}
        single = [{"source": self.config.source.location(), "weight": 1.0, "documents": docs, "tokens": tokens}]
        return {"parts": figures.get("parts"), "sources": figures.get("sources") or single}

    def wait_for_writes(self, timeout: float) -> bool:
        """After `close`: the source's writes for the next run, waited for at most `timeout` seconds."""
        return self._source is None or self._source.wait_for_writes(timeout)

    def close(self) -> None:
        """Stop background reads (the native reader's read-ahead); callable from any thread, more than once."""
        if self._source is not None:
            self._source.close()

"""`DocumentStream`: a reader's documents for a loader config, in stream order: the configured source (opened
through the registry) read by its `stream` (sources.order for a source of units), its share dealt by the config's
reader (`config.shard`), from the start, from a saved cursor, or from what a changed world dealt it.

    stream = DocumentStream(config)
    for doc in stream: ...            # Documents with `resume` set: DocumentStream(config, start=doc.resume)
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.loader.sources.fingerprint import check_tree, tree_summary
from fwe_cli.loader.sources.order import StreamOrder
from fwe_cli.loader.sources.registry import open_source
from fwe_cli.loader.state.elastic import InReplay, deal, documents

if TYPE_CHECKING:
    import numpy as np

    from fwe_cli.loader.config import LoaderConfig
    from fwe_cli.loader.sources.base import Source
    from fwe_cli.loader.sources.position import Position
    from fwe_cli.loader.tokenization.pretokenized import ShardTokens


class DocumentStream:
    """A reader's documents for a config, in stream order, plus what was learned while reading.

    Opening (which reader a local path needs, the file listing, the Hub handshake) happens on first use, inside the
    producer, so its cost is measured as part of the first batch and a hang there is caught by the loader's timeout.
    """

    def __init__(self, config: LoaderConfig, set_stage: Callable[[str], None] = lambda stage: None,
                 mark: Callable[[str], None] = lambda name: None, start: Position | None = None,
                 expect: dict | None = None, bad: BadRecords | None = None, plan: Position | None = None,
                 olds: list | None = None):
        self.config = config
        self.start = start
        """A document's `resume` (the source's cursor): the stream yields that document first (None: from the
        start)."""
        self.expect = expect
        """For a resumed stream: the files its positions were saved over (fingerprint.tree_summary), checked on
        open."""
        self._set_stage = set_stage
        self._mark = mark
        self._bad = bad
        self.plan = plan
        """What a changed world dealt this reader (state.elastic.deal); None: its fresh share."""
        self.olds = olds
        """Until the source opens: the old readers (state.elastic.OldReader) a changed world continues, from which
        `plan` is dealt (it needs the source's units)."""
        self._source: Source | None = None
        self._creating = threading.Lock()
        self._identity: tuple[dict, dict] | None = None
        self._opened = False

    @property
    def source(self) -> Source:
        """The object reading the configured source (created on first use: for a local path it looks at the disk).
        Created once: the consumer's thread (a state before the first batch) and the producer's may ask together."""
        if self._source is None:
            with self._creating:
                if self._source is None:
                    source = open_source(self.config.source, self.config.read_options())
                    if self._bad is not None:  # a resumed run goes on counting from the bad records it had met
                        source.bad = self._bad
                    self._source = source
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

    def identity(self) -> tuple[dict, dict | None]:
        """(the source tree as it pins itself, its files' summary) for a resume state: taken once the source has
        opened (a stat of each file, once), the tree alone before."""
        if self._identity is not None:
            return self._identity
        if not self._opened:
            return self.source.pinned_tree(), None
        self._identity = (self.source.pinned_tree(), tree_summary(self.source))
        return self._identity

    @property
    def order(self) -> StreamOrder:
        """This reader's order: `epochs` epochs from the config's `epoch`, its shuffle."""
        c = self.config
        return StreamOrder(c.shard, c.epoch + c.epochs, c.shuffle_seed, c.shuffle_window, first=c.epoch)

    def __iter__(self) -> Iterator[Document]:
        source = self._open()
        for doc in documents(source, self.order, self.start, self.plan):
            self._mark("first_document")
            yield doc

    def _open(self) -> Source:
        """The source, opened (`open`), then read: its first document is next."""
        source = self.open()
        self._mark("source_opened")
        self._set_stage("reading first document")
        return source

    def open(self) -> Source:
        """The source, opened (its resume cursor checked, its files against the state's, its plan dealt)."""
        source = self.source
        source.open(self._set_stage)
        if self.expect is not None:
            check_tree(source, self.expect)
            self.expect = None
        start = self.start
        while isinstance(start, InReplay):  # a document read again from an old reader's stream: its cursor there
            start = start.at
        if start is not None:
            source.check_resume(start)
        if self.olds is not None:
            self.plan, self.olds = deal(source, self.olds, self.order), None
        self._opened = True
        return source

    def pretokenized(self) -> ShardTokens | None:
        """For a token directory (fwe tokenize's output): its ShardTokens (eos id and vocab size from the manifest,
        no tokenizer loaded), after checking that the config's tokenizer is the one the shards were made with."""
        return self.source.pretokenized()

    def tokenizer(self) -> str:
        """The tokenizer the documents are encoded with: the config's, else the source's own."""
        return self.config.tokenizer or self.source.default_tokenizer()

    def token_chunks(self, sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, np.ndarray, Callable]] | None:
        """For a source of token ids read unshuffled, as dealt afresh: (ids, each document's tokens, its cursor by
        number in the chunk) per chunk of about `next(sizes)` tokens, from `start` (Source.token_chunks); None for
        any other stream."""
        if self.config.shuffle_seed is not None or self.plan is not None or self.olds is not None:
            return None
        if not self.source.reads_tokens:
            return None
        source = self._open()
        chunks = source.token_chunks(self.order, self.start, sizes)
        return None if chunks is None else self._chunks(chunks)

    def _chunks(self, chunks: Iterator) -> Iterator[tuple[np.ndarray, np.ndarray, Callable]]:
        for chunk in chunks:
            self._mark("first_document")
            yield chunk

    def first_batches(self, tokenizer: str):
        """The kept first batches of a fresh stream (Source.first_batches), or None: only for a stream that starts at
        its beginning under no change of world size."""
        if self.start is not None or self.plan is not None or self.olds is not None:
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

"""The producer pipeline: documents -> doc batches -> tokenize (in parallel, in order) -> pack -> batches.

Runs on the prefetch thread (or inline without prefetch). Tokenization of doc batch k+1.. overlaps with
packing of batch k: up to 2 x threads doc batches are in flight on a thread pool and results are taken
strictly in submission order, so the batch stream never depends on thread count, queue depth or timing.
`stage` always names what the producer is doing, so a stall can be reported precisely, and `clock` times each stage
(flow.stages), so a wait can be split by what the producer did during it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Hashable, Iterator

import numpy as np

from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.documents import Document
from fwe_cli.loader.flow.in_background import InBackground, torch_converter
from fwe_cli.loader.flow.in_order import in_order
from fwe_cli.loader.flow.stages import StageClock, bind, stage_key
from fwe_cli.loader.pipeline.doc_batches import doc_batches
from fwe_cli.loader.pipeline.encoding import BatchEncoder, Encoded, effective_threads
from fwe_cli.loader.pipeline.recent import RecentBatches
from fwe_cli.loader.remote.hub_env import requests_sent
from fwe_cli.loader.rows.packing import Packer
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.loader.tokenization.doc_tokenizer import DocTokenizer, load_tokenizer
from fwe_cli.loader.tokenization.pretokenized import ShardTokens

# The tiktoken proof costs CPU on a thread beside the producer: a long run wins it back many times over, a short one
# (a smoke of a few batches) would only pay it at its exit. It starts once this many documents have been read.
UPGRADE_AFTER_DOCS = 512
FIRST_DOC_BATCH = 4
CHUNK_TOKENS = 1 << 20  # a token directory read in order: tokens per chunk once past the first batch


class Pipeline:
    """State shared between the producer thread and the loader's stats (counters are only written here)."""

    def __init__(self, config: LoaderConfig, on_progress: Callable[[dict], None] = lambda info: None,
                 start: dict | None = None, expect_files: dict | None = None, plan=None, olds: list | None = None):
        self.config = config
        self.start = start or {}
        """A batch's position (see __iter__): production continues right after that batch."""
        self.clock = StageClock()  # seconds per stage key; `stage` below enters each description's key
        self.stage = "starting"
        self.tokenizer: DocTokenizer | None = None  # loaded beside the source's opening, inside the first batch
        self._tokenizer_load: InBackground | None = None
        self._closing = threading.Event()  # close(): the producer stops at its next document batch
        self._pool: ThreadPoolExecutor | None = None  # the tokenizer threads, once started
        self.documents = DocumentStream(config, set_stage=self._set_stage, mark=self.mark,
                                        start=self.start.get("doc"), expect=expect_files, plan=plan, olds=olds)
        self.marks: dict[str, float] = {}  # first time (perf_counter) of: tokenizer_ready, source_opened,
        # first_document, first_batch — the milestones `fwe measure` turns into first-batch phases
        self.requests_at: dict[str, int] = {}  # the process's Hub request count (hub_env) at each of them
        self.docs = 0
        self.tokens = 0
        self.batches = 0
        self.encoder: BatchEncoder | None = None  # made once the tokenizer is known (_encode)
        self._packer = Packer(config.seq_len, config.batch_size, config.labels, config.boundaries, config.pack,
                              config.pack_buffer, self.start.get("pack"))
        self.threads = effective_threads(config)
        self._on_progress = on_progress
        self._started = time.perf_counter()
        self._lock = threading.Lock()
        # the document batches of the batches queued, in flight and being packed: which document a batch ended in
        self.recent = RecentBatches()
        self._converting: InBackground | None = None
        self._upgrading = False  # the tokenizer's fast backend asked for (once enough documents were read)

    @property
    def stage(self) -> str:
        return self._stage

    @stage.setter
    def stage(self, description: str) -> None:
        self._stage = description
        self.clock.enter(stage_key(description))

    def _set_stage(self, stage: str) -> None:
        self.stage = stage

    def mark(self, name: str) -> None:
        if name not in self.marks:
            self.marks[name] = time.perf_counter()
            self.requests_at[name] = requests_sent()

    def _encoder(self) -> BatchEncoder:
        """The encoder of the stream's layout for the tokenizer (made once it is known)."""
        with self._lock:
            if self.encoder is None or self.encoder.tokenizer is not self.tokenizer:
                self.encoder = BatchEncoder(self.tokenizer, self.config.bos)
            return self.encoder

    def _encode(self, docs: list[Document]) -> Encoded:
        return self._encoder()(docs)

    def _texts_encoder(self):
        """For a source that counts tokens (a mixture): the function encoding texts to ids, once the tokenizer is
        loaded (on the producer thread, which waits for it now)."""
        if self.tokenizer is None:
            self._await_tokenizer()
        return self._encoder().texts_ids

    def cropped(self) -> dict:
        """The packing, and the tokens and documents it cropped at the rows' ends of the tokens read so far."""
        p = self._packer
        return {"pack": p.pack, "tokens": p.cropped_tokens, "documents": p.cropped_documents,
                "tokens_read": self.tokens}

    def encoded(self) -> tuple[float, dict[str, int]]:
        """(seconds spent encoding, documents each tokenizer backend encoded) for this pipeline."""
        encoder = self.encoder
        return (encoder.tokenize_s, dict(encoder.docs_by_backend)) if encoder is not None else (0.0, {})

    def _count_read(self, docs: int) -> None:
        """`docs` more documents read: counted, and a progress line every report_docs."""
        before = self.docs
        self.docs += docs
        report = self.config.report_docs
        if report and self.docs // report != before // report:
            elapsed = time.perf_counter() - self._started
            crops = self.cropped()
            self._on_progress({"docs": self.docs, "tokens": self.tokens, "batches": self.batches,
                               "docs_per_s": round(self.docs / elapsed, 2),
                               "tokens_per_s": round(self.tokens / elapsed, 1), "pack": crops["pack"],
                               "cropped_tokens": crops["tokens"], "cropped_documents": crops["documents"]})

    def _token_chunks(self, chunks: Iterator) -> Iterator[tuple[Encoded, tuple]]:
        """A token directory read unshuffled (sources.order.leaf_chunks): one shard slice + one eos per chunk, about a
        batch at first (the first batch waits on nothing larger), then doubling up to CHUNK_TOKENS."""
        self.stage = "reading token shards"
        encoder = self.encoder = BatchEncoder(self.tokenizer, self.config.bos)
        for ids, lengths, cursor in chunks:
            first = cursor(0)
            self.recent.chunk(first, lengths, cursor)
            before = self.docs
            self._count_read(len(lengths))
            encoder.count(encoder.tokenizer.backend, len(lengths), 0.0)
            yield encoder.chunk(ids, lengths), (first, None, before)
            if self._closing.is_set():
                return
            self.stage = "reading token shards"

    def _chunk_sizes(self) -> Iterator[int]:
        size = self.config.seq_len * self.config.batch_size
        while True:
            yield size
            size = min(max(size * 2, 1), max(CHUNK_TOKENS, size))

    def _doc_batches(self) -> Iterator[tuple[list[Document], tuple]]:
        """(documents, (the first one's `resume`, their segment, documents read before them)) per document batch
        (pipeline.doc_batches)."""
        for chunk in doc_batches(self.documents, FIRST_DOC_BATCH, self.config.doc_batch, self._closing.is_set):
            if self.tokenizer is None:  # the first documents are here: now the tokenizer is needed
                self._await_tokenizer()
            before = self.docs
            self._count_read(len(chunk))
            self.recent.remember(chunk[0].resume, chunk)
            yield chunk, (chunk[0].resume, chunk[0].segment, before)
        if self.tokenizer is None:  # no documents at all: a tokenizer that cannot load still says so
            self._await_tokenizer()

    def _token_arrays(self) -> Iterator[tuple[Encoded, tuple]]:
        """(ids, (the first document's `resume`, the segment, documents read before)) per document batch, in order."""
        chunks = self.documents.token_chunks(self._chunk_sizes()) if isinstance(self.tokenizer, ShardTokens) else None
        if chunks is not None:
            yield from self._token_chunks(chunks)
            return
        if self.threads <= 1 or isinstance(self.tokenizer, ShardTokens):  # joining shard views needs no threads
            for docs, tag in self._doc_batches():
                self.stage = "tokenizing"
                yield self._encode(docs), tag
                self.stage = "reading documents"
            return
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="fwe-tokenize")
        yield from in_order(self._pool, self.threads, self._encode, self._doc_batches(), self._closing.is_set,
                            lambda waiting: self._set_stage("tokenizing" if waiting else "reading documents"))

    def close(self) -> None:
        """Stop producing: no further document batch is read or tokenized, and the source's background reads stop,
        so a producer waiting on them ends now. Any thread may call it."""
        self._closing.set()
        self.documents.close()

    def join_workers(self) -> None:
        """Wait for the encodes still running after `close` (each is one document batch) and end their threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def loaded_tokenizer(self, timeout: float = 0.0) -> DocTokenizer | None:
        """The tokenizer once loaded, waiting up to `timeout` for it; None when it failed, is late or never started."""
        if self.tokenizer is None and self._tokenizer_load is not None:
            return self._tokenizer_load.ready(timeout)
        return self.tokenizer

    def _start_tokenizer(self) -> None:
        """Load the tokenizer on its own thread (once)."""
        if self._tokenizer_load is None:
            self._tokenizer_load = InBackground(
                lambda c=self.config: load_tokenizer(self.documents.tokenizer(), c.tokenizer_backend, not c.hub_cache),
                "fwe-tokenizer-load", lambda: self.mark("tokenizer_ready"))

    def load_tokenizer(self) -> DocTokenizer:
        """The tokenizer, once loaded (its loading started now if it was not)."""
        self._start_tokenizer()
        return self._tokenizer_load.result()

    def _await_tokenizer(self) -> None:
        self.stage = f"loading tokenizer {self.documents.tokenizer()!r}"
        self.tokenizer = self.load_tokenizer()

    def __iter__(self) -> Iterator[tuple[object, dict, Hashable]]:
        """(batch, its position, its segment) for each batch. A position is {"doc": the `resume` of a document,
        "skip": tokens of the stream from that document on that are in this or earlier batches, and with best-fit
        rows "pack": the buffer's mark}: a pipeline started at it produces the batch after this one first, whatever
        its doc batch, Q or threads (ids are per document). The segment is that of the last documents packed
        (Document.segment; None for a source of one)."""
        # The tokenizer (a Hub download and a parse) loads on its own thread while this one opens the source and
        # reads the first documents: the first batch waits for the slower of the two, not for both in turn.
        c = self.config
        bind(self.clock)  # a source's own `stages.note` on this thread reaches this producer's clock
        self.stage = "opening source"
        self.documents.prepare()
        self.documents.source.bind_encoder(self._texts_encoder, self.threads)
        shards = self.documents.pretokenized()  # a token directory: eos and vocab from its manifest, no tokenizer
        # a fresh stream may begin with the batches an earlier run kept (hub.first_batches): no tokenizer
        kept = None if shards is not None else self.documents.first_batches(self.documents.tokenizer())
        if shards is not None:
            self.tokenizer = shards
            self.mark("tokenizer_ready")
        elif kept is None or not kept.candidate:
            self._start_tokenizer()
        # torch (slow to import) likewise loads beside the source, only when tensors are asked for
        self._converting = InBackground(torch_converter, "fwe-torch-import") if c.as_torch else None
        self.stage = "opening source"
        if kept is not None:  # a warm start's one request: is the stream still at the kept batches' commit?
            yield from self._replay(kept)
        yield from self._packed(kept)
        self.stage = "finished"

    def _output(self, batch: np.ndarray):
        """The batch as the consumer takes it: the array, or a torch tensor with as_torch."""
        if self._converting is None:
            return batch
        return self._converting.result()(batch)

    def _replay(self, kept) -> Iterator[tuple[object, dict, Hashable]]:
        """The batches an earlier run kept, when the opened source confirms their commit; each is counted as made
        (its documents and tokens, the document it ended in: a resume state after it is exact), then the stream goes
        on right after the last one. The real tokenizer starts loading once the consumer wants more."""
        self.documents.open()
        if kept.confirm():
            self.tokenizer = kept.stand_in(self.load_tokenizer)
            self.mark("source_opened")
            position = None
            for batch, position, ended, docs, tokens in kept.entries():
                self.recent.remember(position["doc"], ended)  # the document it ended in, as it was kept
                self.docs, self.tokens = docs, tokens
                self.batches += 1
                self.mark("first_batch")
                yield self._output(batch), position, None
            kept.wait_for_more()  # a run of one batch ends without loading a tokenizer
            if position is not None:
                self.start, self.documents.start = position, position["doc"]
        if not self._closing.is_set():  # a run that ended with the kept batches needs no tokenizer
            self._start_tokenizer()

    def _packed(self, kept) -> Iterator[tuple[object, dict, Hashable]]:
        """The batches packed from the stream's token arrays (after any replayed ones), then those a best-fit buffer
        still fills once the stream has ended."""
        packer = self._packer
        to_skip = int(self.start.get("skip", 0))  # tokens of the resumed-from batch and earlier: produced before
        segment = None
        for encoded, (first, segment, docs_before) in self._token_arrays():
            self.stage = "packing"
            self.recent.measured(first, encoded.lengths)  # a state names the document a batch ended in by them
            skipped = min(to_skip, len(encoded.ids))
            to_skip -= skipped
            tokens_before = self.tokens
            self.tokens += len(encoded.ids) - skipped
            for batch, position in packer.add(*encoded.past(skipped), tag=first, skipped=skipped):
                if kept is not None:  # what a resume from this batch re-reads is not counted twice (docs, tokens)
                    kept.record(batch, position, self.recent, self.tokenizer, docs_before,
                                tokens_before + position["skip"] - skipped)
                yield from self._deliver(batch, position, segment)
        for batch, position in packer.finish():
            yield from self._deliver(batch, position, segment)

    def _deliver(self, batch, position: dict, segment: Hashable) -> Iterator[tuple[object, dict, Hashable]]:
        self.batches += 1
        self.mark("first_batch")
        yield self._output(batch), position, segment
        if self.docs >= UPGRADE_AFTER_DOCS and not self._upgrading:  # never before batch 1, nor in a short run
            self._upgrading = True
            getattr(self.tokenizer, "start_upgrade", lambda: None)()
        self.stage = "packing"  # the next batch of these ids; reading the next ones sets its own stage

"""The producer pipeline: documents -> doc batches -> tokenize (in parallel, in order) -> pack -> batches.

Runs on the prefetch thread (or inline without prefetch). Tokenization of doc batch k+1.. overlaps with
packing of batch k: up to 2 x threads doc batches are in flight on a thread pool and results are taken
strictly in submission order, so the batch stream never depends on thread count, queue depth or timing.
`stage` always names what the producer is doing, so a stall can be reported precisely, and `clock` times each stage
(loader.stages), so a wait can be split by what the producer did during it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import numpy as np

from fwe_cli.hostinfo import usable_cores
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.elastic import ElasticPlan, RecentBatches
from fwe_cli.loader.hub_env import requests_sent
from fwe_cli.loader.doc_batches import doc_batches
from fwe_cli.loader.in_background import InBackground, torch_converter
from fwe_cli.loader.in_order import in_order
from fwe_cli.loader.packing import Packer
from fwe_cli.loader.stages import StageClock, bind, stage_key
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.stream import DocumentStream
from fwe_cli.loader.sources.token_dir import BACKEND, ShardTokens
from fwe_cli.loader.tokenization.doc_tokenizer import DocTokenizer, load_tokenizer

MAX_AUTO_THREADS = 8
# The tiktoken proof costs CPU on a thread beside the producer: a long run wins it back many
# times over, a short one (a smoke of a few batches) would only pay it at its exit. It starts once this many
# documents have been read (a training run gets there at once).
UPGRADE_AFTER_DOCS = 512
FIRST_DOC_BATCH = 4
CHUNK_TOKENS = 1 << 20  # a token directory read in order: tokens per chunk once past the first batch


def effective_threads(config: LoaderConfig) -> int:
    """tokenizer_threads, or one per usable core (capped): both backends release the GIL while they encode, so
    threads scale with cores, and more threads than cores only add switching (figures: runbooks/throughput.md).
    Threads only: nothing here forks (a fork after a tokenizer has started its Rust thread pool can deadlock the
    child)."""
    return config.tokenizer_threads or min(MAX_AUTO_THREADS, usable_cores())


class Pipeline:
    """State shared between the producer thread and the loader's stats (counters are only written here)."""

    def __init__(self, config: LoaderConfig, on_progress: Callable[[dict], None] = lambda info: None,
                 start: dict | None = None, expect_files: list[dict] | None = None, plan: ElasticPlan | None = None):
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
                                        start=self.start.get("doc"), expect=expect_files, plan=plan)
        self.marks: dict[str, float] = {}  # first time (perf_counter) of: tokenizer_ready, source_opened,
        # first_document, first_batch — the milestones `fwe measure` turns into first-batch phases
        self.requests_at: dict[str, int] = {}  # the process's Hub request count (hub_env) at each of them
        self.docs = 0
        self.tokens = 0
        self.batches = 0
        self.tokenize_s = 0.0
        self.docs_by_backend: dict[str, int] = {}  # documents each tokenizer backend encoded for this pipeline
        self.threads = effective_threads(config)
        self._on_progress = on_progress
        self._started = time.perf_counter()
        self._lock = threading.Lock()
        # the document batches of the batches queued, in flight and being packed: which document a batch ended in
        self.recent = RecentBatches(config.queue_depth + 2 * self.threads + 4, self._stream_tokens)

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

    def _encode(self, docs: list[Document]) -> np.ndarray:
        t0 = time.perf_counter()
        tokenizer = self.tokenizer
        backend = getattr(tokenizer, "current", lambda: tokenizer)()  # an UpgradingTokenizer's backend of the moment
        if docs[0].ids is not None:  # read from token shards: ids(doc) + [eos] each, as encode_docs gives
            ids = np.concatenate([part for d in docs for part in (d.ids[d.delivered:], self._eos)
                                  if len(part)]).astype(np.int32, copy=False)
        elif any(d.delivered for d in docs):  # after a world change: each such document's rest, encoded alone
            ids = np.concatenate([backend.encode_docs([d.text])[d.delivered:] if d.delivered else
                                  backend.encode_docs([d.text]) for d in docs])
        else:
            ids = backend.encode_docs([d.text for d in docs])
        self._count_encoded(backend.backend, len(docs), time.perf_counter() - t0)
        return ids

    def _stream_tokens(self, doc: Document) -> int:
        """How many tokens `doc` puts in this rank's stream: its ids and end-of-text, less those delivered before."""
        if doc.ids is not None:
            return len(doc.ids) + 1 - doc.delivered
        tokenizer = self.tokenizer
        return len(getattr(tokenizer, "current", lambda: tokenizer)().encode_docs([doc.text])) - doc.delivered

    def _count_encoded(self, backend: str, docs: int, seconds: float) -> None:
        with self._lock:
            self.tokenize_s += seconds
            self.docs_by_backend[backend] = self.docs_by_backend.get(backend, 0) + docs

    def _count_read(self, docs: int) -> None:
        """`docs` more documents read: counted, and a progress line every report_docs."""
        before = self.docs
        self.docs += docs
        report = self.config.report_docs
        if report and self.docs // report != before // report:
            elapsed = time.perf_counter() - self._started
            self._on_progress({"docs": self.docs, "tokens": self.tokens, "batches": self.batches,
                               "docs_per_s": round(self.docs / elapsed, 2),
                               "tokens_per_s": round(self.tokens / elapsed, 1)})

    def _token_chunks(self) -> Iterator[tuple[np.ndarray, tuple[dict | None, str | None]]]:
        """A token directory read in order: one shard slice + one eos per chunk, about a batch at first (the first
        batch waits on nothing larger), then doubling up to CHUNK_TOKENS (see sources.token_dir)."""
        def sizes() -> Iterator[int]:
            size = self.config.seq_len * self.config.batch_size
            while True:
                yield size
                size = min(max(size * 2, 1), max(CHUNK_TOKENS, size))

        self.stage = "reading token shards"
        for ids, resume, lengths in self.documents.token_chunks(sizes()):
            self.recent.remember(resume, (resume["epoch"], resume["index"], lengths))
            self._count_read(len(lengths))
            self._count_encoded(BACKEND, len(lengths), 0.0)
            yield ids, (resume, None)
            if self._closing.is_set():
                return
            self.stage = "reading token shards"

    def _doc_batches(self) -> Iterator[tuple[list[Document], tuple[dict | None, str | None]]]:
        """(documents, (the first one's `resume`, the last one's origin)) per document batch (loader.doc_batches)."""
        for chunk in doc_batches(self.documents, FIRST_DOC_BATCH, self.config.doc_batch, self._closing.is_set):
            if self.tokenizer is None:  # the first documents are here: now the tokenizer is needed
                self._await_tokenizer()
            self._count_read(len(chunk))
            self.recent.remember(chunk[0].resume, chunk)
            yield chunk, (chunk[0].resume, chunk[-1].origin)
        if self.tokenizer is None:  # no documents at all: a tokenizer that cannot load still says so
            self._await_tokenizer()

    def _token_arrays(self) -> Iterator[tuple[np.ndarray, tuple[dict | None, str | None]]]:
        """(ids, (the first document's `resume`, the last one's origin)) per document batch, in order."""
        if isinstance(self.tokenizer, ShardTokens) and self.documents.in_order():
            yield from self._token_chunks()
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

    def __iter__(self) -> Iterator[tuple[object, dict]]:
        """(batch, its position) for each batch. A position is {"doc": the `resume` of a document, "skip": tokens of
        the stream from that document on that are in this or earlier batches, and for a source of two parts "part":
        'head' or 'tail', the part of the batch's last document}: a pipeline started at it produces
        the batch after this one first, whatever its doc batch, Q or threads (ids are per document, so the token
        stream from a document on does not depend on how documents were grouped for encoding)."""
        # The tokenizer (a Hub download and a parse) loads on its own thread while this one opens the source and
        # reads the first documents: the first batch waits for the slower of the two, not for both in turn.
        c = self.config
        bind(self.clock)  # a source's own `stages.note` on this thread reaches this producer's clock
        self.stage = "opening source"
        self.documents.prepare()
        shards = self.documents.pretokenized()  # a token directory: eos and vocab from its manifest, no tokenizer
        # a fresh Hub stream may begin with the batches an earlier run kept (sources/hub_first_batches): no tokenizer
        kept = None if shards is not None or self.start or self.documents.plan is not None else getattr(
            self.documents.source, "first_batches", lambda *args: None)(c, self.documents.tokenizer())
        if shards is not None:
            self.tokenizer, self._eos = shards, np.array([shards.eos_id], dtype=np.int32)
            self.mark("tokenizer_ready")
        elif kept is None or not kept.candidate:
            self._start_tokenizer()
        # torch (slow to import) likewise loads beside the source, only when tensors are asked for
        converting = InBackground(torch_converter, "fwe-torch-import") if c.as_torch else None
        self.stage = "opening source"
        packer = Packer(self.config.seq_len, self.config.batch_size)
        to_output = None
        upgrading = False
        if kept is not None:  # a warm start's one request: is the stream still at the kept batches' commit?
            self.documents.source.open(self._set_stage)
            for batch, position in kept.replay(self) if kept.confirm(self.documents.source) else ():
                to_output = to_output or (converting.result() if converting is not None else None)
                yield (to_output(batch) if to_output else batch), position
            if not self._closing.is_set():  # a run that ended with the kept batches needs no tokenizer
                self._start_tokenizer()
        to_skip = int(self.start.get("skip", 0))  # tokens of the resumed-from batch and earlier: produced before
        for ids, (first, part) in self._token_arrays():
            self.stage = "packing"
            skipped = min(to_skip, len(ids))
            to_skip -= skipped
            self.tokens += len(ids) - skipped
            for batch, used in packer.add(ids[skipped:]):
                self.batches += 1
                self.mark("first_batch")
                if converting is not None and to_output is None:
                    to_output = converting.result()
                position = {"doc": first, "skip": skipped + used}
                if part is not None:  # a source of two parts: which one the batch's last document came from
                    position["part"] = part
                if kept is not None:
                    kept.record(self, batch, position)
                yield (to_output(batch) if to_output else batch), position
                if self.docs >= UPGRADE_AFTER_DOCS and not upgrading:  # never before batch 1, nor in a short run
                    upgrading = True
                    getattr(self.tokenizer, "start_upgrade", lambda: None)()
                self.stage = "packing"  # the next batch of these ids; reading the next ones sets its own stage
        self.stage = "finished"

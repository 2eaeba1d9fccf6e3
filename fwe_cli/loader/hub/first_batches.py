"""The first packed batches of a native Hub stream, kept beside the head cache (hub.head_cache) so that a warm start
hands them over without a tokenizer, a parquet decoder or the rows: what a warm start's first batch needs is then the
interpreter, this file and the listing's one request (which confirms the commit they were made from).

    first = FirstBatches(config, tokenizer_spec, source)  # `usable` False when nothing can be kept
    first.candidate                                       # an entry for the commit the branch pointed at last time
    if first.confirm():                                   # the source is open: still that commit?
        tokenizer = first.stand_in(load)                  # described from the entry until the first encode
        for batch, position, ended, docs, tokens in first.entries(): ...
    else: ... first.record(batch, position, ...)          # the first FIRST_BATCHES batches of a run are kept

An entry is keyed by everything the batches depend on: the listing (its folder: repo, commit, config, split), the
tokenizer's bytes (sha256 of its tokenizer.json), the tokenizer backend setting, the batch shape, the shard, the
epochs and the bad-records policy; a change of any of them misses. It holds the batches (int32), their positions (a
resume state after any of them is exact, the document it ended in included) and what the stats say of the tokenizer
(name, backend, vocabulary size, end-of-text id) until the real one is loaded, which happens only when the consumer
asks for more than the first batch, or GRACE_S after it was handed over (a smoke of one batch never loads it).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import Callable

import orjson

from fwe_cli.loader.sources.deal import Ended
from fwe_cli.loader.sources.position import decode, encode
from fwe_cli.loader.tokenization.names import described

FIRST_BATCHES = 4  # batches kept per key: a smoke's default 3 and one more
ENTRY_FORMAT = 3  # 3: positions are a reader's cursors (sources.order)
GRACE_S = 0.25  # after the kept batches: how long the producer waits for the consumer before loading the tokenizer


def tokenizer_identity(spec: str) -> str | None:
    """sha256 of the tokenizer.json `spec` names as it is on disk now ('byte' for the byte tokenizer); None when it is
    not on this machine yet (a Hub id never downloaded): nothing can be matched then."""
    from fwe_cli.loader.remote.hub_env import cached_file
    from fwe_cli.loader.tokenization.names import BYTE, HUB_ALIASES

    if spec == BYTE:
        return BYTE
    path = os.path.join(spec, "tokenizer.json") if os.path.isdir(spec) else spec
    if not os.path.isfile(path):
        path = cached_file(HUB_ALIASES.get(spec, spec), "tokenizer.json")
    if path is None:
        return None
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


class LazyTokenizer:
    """Stands for the tokenizer the kept batches were made with: described from the entry until the first encode,
    which waits for `load()` (the real one, loading on its own thread) and from then on is that one."""

    def __init__(self, described: dict, load: Callable[[], object]):
        self._described, self._load, self._real = described, load, None

    def loaded(self):
        if self._real is None:
            self._real = self._load()
        return self._real

    def current(self):
        real = self.loaded()
        return getattr(real, "current", lambda: real)()

    def encode(self, text: str):
        return self.loaded().encode(text)

    def encode_docs(self, texts):
        return self.loaded().encode_docs(texts)

    def start_upgrade(self) -> None:
        getattr(self.loaded(), "start_upgrade", lambda: None)()

    def __getattr__(self, name: str):
        if self._real is not None:
            return getattr(self._real, name)
        if name in self._described:
            return self._described[name]
        raise AttributeError(name)


class FirstBatches:
    """The kept first batches of one fresh, unshuffled native Hub stream (`usable` False for any other)."""

    def __init__(self, config, tokenizer_spec: str, source):
        from fwe_cli.loader.hub.head_cache import HeadCache
        from fwe_cli.loader.hub.listing import cached_listing

        spec = source.spec.options  # the Hub source's own options (HubOptions), wherever it stands in the tree
        self._source = source
        # plain arrays only (batches with labels or boundaries are dicts, not kept), and rows that follow the stream (a
        # best-fit batch's position holds its buffer's)
        self.usable = bool(config.hub_cache and config.shuffle_seed is None and not (config.labels or config.boundaries)
                           and config.pack != "best-fit")
        self.candidate = False
        """An entry exists for the commit the branch pointed at when it was last listed (the request decides)."""
        self._tokenizer_spec = tokenizer_spec
        self._key = {"format": ENTRY_FORMAT, "backend": config.tokenizer_backend, "seq_len": config.seq_len,
                     "batch_size": config.batch_size, "shard": [config.shard.mod, config.shard.rem],
                     "epochs": config.epochs, "bad_records": config.bad_records, "bos": config.bos,
                     "pack": config.pack}
        if spec.where is not None:  # a filtered stream's batches are its own
            self._key["where"] = spec.where
        self._shape = (config.batch_size, config.seq_len)
        self._entry: dict | None = None
        self._kept: list[tuple] = []  # (batch bytes, position, documents, tokens) of each batch kept
        self._records: list[dict] = []  # the entry's record of each, made by the writer thread
        self._described: dict = {}
        self._more = threading.Event()
        self._writing = threading.Lock()
        self._writers: list[threading.Thread] = []
        self._written = 0
        self._head = None
        self.name: str | None = None
        listing = cached_listing(spec.dataset, spec.name, spec.split, spec.revision) if self.usable else None
        if listing is not None and self._named():
            self._expected = listing.revision
            self.candidate = HeadCache(listing).has_entry(self.name)

    def _named(self) -> bool:
        """Whether the entry's name is known: the tokenizer is on this machine (a first run downloads it)."""
        if self.name is None:
            identity = tokenizer_identity(self._tokenizer_spec)
            if identity is not None:
                key = dict(self._key, tokenizer=identity)
                self.name = "batches-" + hashlib.sha256(orjson.dumps(key, option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]
        return self.name is not None

    def confirm(self) -> bool:
        """After the source is open: whether the kept entry is of the commit it reads (else it is not used)."""
        self._head = self._source.head
        if self._head is not None and self.candidate and self._source.revision == self._expected:
            self._entry = _read(self._head.entry(self.name), self._shape)
        self.candidate = self._entry is not None
        return self.candidate

    def stand_in(self, load: Callable[[], object]) -> LazyTokenizer:
        """The tokenizer the kept batches were made with, described from the entry until its first encode, which
        waits for `load()`."""
        return LazyTokenizer(self._entry["tokenizer"], load)

    def entries(self):
        """(batch, position, ended, documents, tokens) of each kept batch, in order: its position (a resume state
        after it is exact), the document it ended in (sources.deal.Ended: its cursor, tokens of it delivered, its
        tokens), and what the run had read and produced that a resume from it does not read again."""
        self.usable = False  # nothing is kept from a run that began with kept batches
        for record, batch in zip(self._entry["batches"], self._entry["arrays"]):
            position = {"doc": decode(record["position"]["doc"]), "skip": record["position"]["skip"]}
            cursor, delivered, tokens = record["ended"]
            yield batch, position, Ended(decode(cursor), delivered, tokens), record["docs"], record["tokens"]

    def wait_for_more(self) -> None:
        """After the kept batches: until the consumer wants more, GRACE_S passed or the loader closes (`more`)."""
        self._more.wait(GRACE_S)

    def describe(self) -> dict:
        """{"replayed": batches handed over from the cache, "kept": batches of this run kept for the next}."""
        return {"replayed": len(self._entry["batches"]) if self._entry else 0, "kept": len(self._kept)}

    def consumer_wants_more(self) -> None:
        """The consumer wants more than its first batch, or the loader closes."""
        self._more.set()

    def record(self, batch, position: dict, recent, tok, docs: int, tokens: int) -> None:
        """Keep one of a run's first FIRST_BATCHES batches (`recent`: the pipeline's RecentBatches, `tok` its
        tokenizer; `docs` and `tokens`: what the run read and produced that a resume from `position` does not read
        again): taken now, written on a `fwe-keep-batches` thread (a run may end after any batch; the tokenizer's
        hash, the document each batch ended in (which encodes that batch's documents again) and the write stay off
        the way to the batch). A write that fails only costs the next warm start its kept batches."""
        if not self.usable or self._head is None or len(self._kept) >= FIRST_BATCHES:
            return
        if tok is None:
            self.usable = False
            return
        if not self._kept:  # what the stats say of the tokenizer, as it is now (its backend may change later)
            self._described = dict(described(tok), check_s=None)
        held = recent.held(position)  # the documents it ended in, while the consumer has not moved past them
        self._kept.append((batch.astype("int32", copy=False).tobytes(), position, docs, tokens, held))
        writer = threading.Thread(target=self._write, args=(recent, len(self._kept)), name="fwe-keep-batches",
                                  daemon=True)
        writer.start()
        self._writers.append(writer)

    def _write(self, recent, batches: int) -> None:
        """Write the entry of the first `batches` kept batches (never replacing one of more)."""
        with self._writing:
            if batches <= self._written or not self.usable or not self._named():
                return
            for _, position, docs, tokens, held in self._kept[len(self._records):batches]:
                ended = recent.ended_in(held, position)
                if ended is None:
                    self.usable = False
                    return
                saved = {"doc": encode(position["doc"]), "skip": position["skip"]}
                self._records.append({"position": saved, "ended": [encode(ended.cursor), ended.delivered, ended.tokens],
                                      "docs": docs,
                                      "tokens": tokens})
            header = {"format": ENTRY_FORMAT, "shape": list(self._shape), "batches": self._records[:batches],
                      "tokenizer": self._described}
            data = orjson.dumps(header) + b"\n" + b"".join(kept[0] for kept in self._kept[:batches])
            self.usable = self._head.put_entry(self.name, data)
            self._written = batches

    def wait_for_writes(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for the kept batches to be written (the loader closes: the next start may
        read them); True when no write is left. A write still running goes on, on its daemon thread: the next start
        reads it if it ends before this process does, else misses it."""
        ends = time.monotonic() + timeout
        for writer in list(self._writers):
            writer.join(max(0.0, ends - time.monotonic()))
        return not any(writer.is_alive() for writer in self._writers)


def _read(data: bytes | None, shape: tuple[int, int]) -> dict | None:
    """An entry's header with its batches as arrays, or None when it is absent or damaged."""
    if not data:
        return None
    import numpy as np

    head, _, body = data.partition(b"\n")
    try:
        entry = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None
    size = shape[0] * shape[1] * 4
    batches = entry.get("batches") if isinstance(entry, dict) else None
    if entry.get("format") != ENTRY_FORMAT or not batches or len(body) != size * len(batches):
        return None
    writable = bytearray(body)  # a consumer may write into its batches
    entry["arrays"] = [np.frombuffer(writable, np.int32, shape[0] * shape[1], i * size).reshape(shape)
                       for i in range(len(batches))]
    return entry

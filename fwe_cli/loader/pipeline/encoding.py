"""A document batch -> its tokens in the stream's layout, and what the packer needs to know of its documents.

Two layouts: ids(doc) + [end-of-text] per document (the default), or, with `bos`, [delimiter] + ids(doc) (llm.c's
convention: the tokenizer's BOS token, else its end-of-text id, before each document; a stream then equals llm.c's
shards token for token). Each document keeps its number of tokens either way. A document of which a rank of another
world delivered the first tokens (loader.elastic) starts past them. Each document's length and the position of its
first token come with the ids: the packer cuts document boundaries by them (rows.packing), and a resume state
names the document a batch ended in by them (pipeline.recent).

Both tokenizer backends release the GIL while they encode: the pipeline calls an encoder from its tokenizer threads.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple, Sequence

import numpy as np

from fwe_cli.hostinfo import node_share
from fwe_cli.loader.documents import Document
from fwe_cli.loader.tokenization.doc_ends import DocEnds
from fwe_cli.loader.tokenization.pretokenized import BACKEND, ShardTokens

MAX_AUTO_THREADS = 8


def effective_threads(config, workers: int = 1) -> int:
    """tokenizer_threads, or one per core of this process's share of its node (hostinfo.node_share: the ranks
    torchrun started on it share its cores), capped, then split among the rank's `workers` (DataLoader workers):
    both backends release the GIL while they encode, so threads scale with cores, and more threads than cores only
    add switching (figures: runbooks/throughput.md). Threads only: nothing here forks (a fork after a tokenizer has
    started its Rust thread pool can deadlock the child)."""
    budget = config.tokenizer_threads or min(MAX_AUTO_THREADS, node_share())
    return max(1, budget // max(1, workers))


class Encoded(NamedTuple):
    ids: np.ndarray
    """int32 tokens of the documents, in the stream's layout."""
    lengths: np.ndarray
    """Each document's tokens in `ids`."""
    offsets: np.ndarray
    """The position within its document of each document's first token in `ids` (its tokens delivered before)."""

    def past(self, skip: int) -> "Encoded":
        """The same from token `skip` on (a resumed stream's first document batch): the documents before it dropped,
        the one it falls in shortened and starting further in."""
        ids, lengths, offsets = self
        if not skip:
            return self
        ends = np.cumsum(lengths)
        k = int(np.searchsorted(ends, skip, side="right"))
        lengths, offsets = lengths[k:].copy(), offsets[k:].copy()
        if len(lengths):
            cut = skip - (int(ends[k - 1]) if k else 0)
            lengths[0] -= cut
            offsets[0] += cut
        return Encoded(ids[skip:], lengths, offsets)


def to_bos(ids: np.ndarray, lengths: np.ndarray, delimiter: int) -> np.ndarray:
    """ids(doc) + [eos] per document (of `lengths`) -> [delimiter] + ids(doc): the same length, shifted by one."""
    out = np.empty_like(ids)
    out[0] = delimiter
    out[1:] = ids[:-1]
    out[np.cumsum(lengths)[:-1]] = delimiter
    return out


def current_backend(tokenizer):
    """The encoder of the moment (an upgrading tokenizer hands its work to tiktoken once proven identical)."""
    current = getattr(tokenizer, "current", None)
    return current() if current is not None else tokenizer


class BatchEncoder:
    """Encodes document batches for one tokenizer (or a token directory's ShardTokens) in one layout."""

    def __init__(self, tokenizer, bos: bool = False):
        self.tokenizer, self.bos = tokenizer, bos
        self.shards = isinstance(tokenizer, ShardTokens)
        self._ends = None if self.shards else DocEnds(tokenizer)
        self._eos = np.array([tokenizer.eos_id], dtype=np.int32)
        self._delimiter = np.array([tokenizer.bos_id], dtype=np.int32)
        self._lock = threading.Lock()
        self.tokenize_s = 0.0
        self.docs_by_backend: dict[str, int] = {}
        """Documents each tokenizer backend encoded."""

    def __call__(self, docs: list[Document]) -> Encoded:
        t0 = time.perf_counter()
        backend = BACKEND if self.shards else current_backend(self.tokenizer)
        if self.shards or any(d.ids is not None or d.delivered for d in docs):  # (a mix: token ids beside text)
            encoded = self._one_by_one(docs, backend)
        else:
            ids, lengths = self._ends.encode(backend, [d.text for d in docs])
            encoded = Encoded(to_bos(ids, lengths, int(self._delimiter[0])) if self.bos else ids, lengths,
                              np.zeros(len(docs), np.int64))
        self.count(backend if isinstance(backend, str) else backend.backend, len(docs), time.perf_counter() - t0)
        return encoded

    def _one_by_one(self, docs: Sequence[Document], backend) -> Encoded:
        """Each document alone: a token shard's ids, or a text encoded by itself; past its delivered tokens."""
        parts = []
        for doc in docs:
            if doc.ids is not None:
                whole = (self._delimiter, doc.ids) if self.bos else (doc.ids, self._eos)
                part = np.concatenate(whole).astype(np.int32, copy=False)
            else:
                part = backend.encode_docs([doc.text])
                if self.bos:
                    part = np.concatenate((self._delimiter, part[:-1]))
            parts.append(part[doc.delivered:])
        ids = np.concatenate(parts).astype(np.int32, copy=False)
        lengths = np.array([len(p) for p in parts], np.int64)
        return Encoded(ids, lengths, np.array([d.delivered for d in docs], np.int64))

    def texts_ids(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's ids, without its end-of-text (what a source that counts tokens keeps on its documents)."""
        ids, lengths = self._ends.encode(current_backend(self.tokenizer), texts)
        ends = np.cumsum(lengths)
        return [ids[end - length:end - 1] for end, length in zip(ends.tolist(), lengths.tolist())]

    def chunk(self, ids: np.ndarray, lengths: np.ndarray) -> Encoded:
        """A token directory's chunk read in order (ids(doc) + [eos] per document of `lengths`) in this layout."""
        out = to_bos(ids, lengths, int(self._delimiter[0])) if self.bos else ids
        return Encoded(out, lengths, np.zeros(len(lengths), np.int64))

    def count(self, backend: str, docs: int, seconds: float) -> None:
        with self._lock:
            self.tokenize_s += seconds
            self.docs_by_backend[backend] = self.docs_by_backend.get(backend, 0) + docs

"""Documents -> shard-ready tokens on every core: [eot, ids(doc0), eot, ids(doc1), ...] plus each document's length.

The project's tokenizers encode a batch of documents to one array, ids(doc0) + [eot] + ids(doc1) + [eot] + ..., with
each document's length (fwe_cli.loader.tokenization.doc_ends); moving its last end-of-text token to the front gives
llm.c's layout (end-of-text *before* every document).

Batches are encoded on a thread pool (fwe_cli.loader.flow.in_order: both backends release the GIL; nothing forks) and
taken strictly in submission order, so the output never depends on thread count or timing; the tiktoken backend is
used only once proven to give identical ids (UpgradingTokenizer), so it cannot change the output either.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np

from fwe_cli.errors import TokenizerError
from fwe_cli.loader.flow.in_order import in_order
from fwe_cli.loader.pipeline.encoding import current_backend
from fwe_cli.loader.tokenization.doc_ends import DocEnds

DOC_BATCH = 256  # documents per encode call: large enough that per-call overhead vanishes, small enough to spread


@dataclass
class Encoded:
    """One batch of documents, encoded."""

    tokens: np.ndarray  # [eot, ids(doc0), eot, ids(doc1), ...] in the shard dtype
    lengths: np.ndarray  # int64, each document's token count including its leading eot
    resumes: list  # each document's `resume` (where a stream opened anew yields it first)
    bad_before: list  # bad records counted before each document was read (see run.py)


class DocEncoder:
    """Encodes document batches with `tokenizer` on `threads` threads, in order."""

    def __init__(self, tokenizer, threads: int, dtype: np.dtype, doc_batch: int = DOC_BATCH):
        self.tokenizer = tokenizer
        self.threads = max(1, threads)
        self.dtype = dtype
        self.doc_batch = doc_batch
        self.eot = int(tokenizer.eos_id)
        self.ends = DocEnds(tokenizer)
        self.by_backend: dict[str, int] = {}

    @property
    def fallbacks(self) -> int:
        """Batches whose split by the literal failed its check and were encoded document by document."""
        return self.ends.fallbacks

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(tokens with the eot before each document, lengths) for `texts` (not empty)."""
        backend = current_backend(self.tokenizer)
        ids, lengths = self.ends.encode(backend, texts)
        self.by_backend[backend.backend] = self.by_backend.get(backend.backend, 0) + len(texts)
        out = np.empty(len(ids), dtype=self.dtype)
        out[0] = self.eot
        if len(ids) > 1:
            body = ids[:-1]
            if body.size and (int(body.max()) > np.iinfo(self.dtype).max or int(body.min()) < 0):
                raise TokenizerError(f"tokenizer {self.tokenizer.name!r} gave id {int(body.max())}, outside "
                                     f"{self.dtype.name} (vocab_size {self.tokenizer.vocab_size})")
            out[1:] = body
        return out, lengths

    def batches(self, docs: Iterable, bad_count: Callable[[], int],
                closing: Callable[[], bool] = lambda: False) -> Iterator[Encoded]:
        """Encoded batches of `docs` (Documents), in order; `bad_count()` is read before each document is pulled."""
        it = iter(docs)

        def chunks() -> Iterator[tuple[list, list]]:
            while not closing():
                chunk, bads = [], []
                for _ in range(self.doc_batch):
                    bads.append(bad_count())
                    doc = next(it, None)
                    if doc is None:
                        bads.pop()
                        break
                    chunk.append(doc)
                if not chunk:
                    return
                yield chunk, bads
                if len(chunk) < self.doc_batch:
                    return

        def job(chunk: list) -> tuple[np.ndarray, np.ndarray]:
            return self.encode([d.text for d in chunk])

        if self.threads == 1:
            for chunk, bads in chunks():
                yield Encoded(*job(chunk), [d.resume for d in chunk], bads)
            return
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="fwe-tokens")
        for (tokens, lengths), (chunk, bads) in in_order(pool, self.threads, job, ((c, (c, b)) for c, b in chunks())):
            yield Encoded(tokens, lengths, [d.resume for d in chunk], bads)


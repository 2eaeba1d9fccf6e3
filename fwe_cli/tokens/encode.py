"""Documents -> shard-ready tokens on every core: [eot, ids(doc0), eot, ids(doc1), ...] plus each document's length.

The project's tokenizers (fwe_cli/loader/tokenization/doc_tokenizer.py) encode a batch of documents to one array,
ids(doc0) + [eot] + ids(doc1) + [eot] + ...; moving its last end-of-text token to the front gives llm.c's layout
(end-of-text *before* every document). Per-document lengths come from where each document's own end-of-text token
sits, which needs care: a text holding the literal end-of-text string (GPT-2's "<|endoftext|>") encodes it to the
end-of-text id, inside the document. `splits_by_literal` says when that literal is the only way the id can appear
(no normalizer, the token is not single-word, no other added token contains it); then document i ends at its
(1 + occurrences of the literal)-th end-of-text id, and the total is checked. Otherwise, or when the check fails,
each document is encoded on its own (exact, slower).

Batches are encoded on a thread pool (fwe_cli.loader.in_order: both backends release the GIL; nothing forks) and
taken strictly in submission order, so the output never depends on thread count or timing; the tiktoken backend is
used only once proven to give identical ids (UpgradingTokenizer), so it cannot change the output either.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np

from fwe_cli.errors import TokenizerError
from fwe_cli.loader.in_order import in_order

DOC_BATCH = 256  # documents per encode call: large enough that per-call overhead vanishes, small enough to spread


@dataclass
class Encoded:
    """One batch of documents, encoded."""

    tokens: np.ndarray  # [eot, ids(doc0), eot, ids(doc1), ...] in the shard dtype
    lengths: np.ndarray  # int64, each document's token count including its leading eot
    resumes: list  # each document's `resume` (where a stream opened anew yields it first)
    bad_before: list  # bad records counted before each document was read (see run.py)


def _hf(tokenizer):
    """The tokenizers.Tokenizer behind a DocTokenizer (None for the byte tokenizer)."""
    hf = getattr(tokenizer, "hf", tokenizer)
    return getattr(hf, "tokenizer", None)


def splits_by_literal(tokenizer) -> bool:
    """Whether the end-of-text id appears in a document's ids exactly where its text holds the literal token."""
    raw = _hf(tokenizer)
    if raw is None:
        return getattr(tokenizer, "name", "") == "byte"  # ids 0..255 never equal its end-of-text id 256
    literal = getattr(tokenizer, "eos_token", None)
    if not literal or raw.normalizer is not None:
        return False
    for token in raw.get_added_tokens_decoder().values():
        if token.content == literal and token.single_word:
            return False
        if token.content != literal and literal in token.content:
            return False
    return True


class DocEncoder:
    """Encodes document batches with `tokenizer` on `threads` threads, in order."""

    def __init__(self, tokenizer, threads: int, dtype: np.dtype, doc_batch: int = DOC_BATCH):
        self.tokenizer = tokenizer
        self.threads = max(1, threads)
        self.dtype = dtype
        self.doc_batch = doc_batch
        self.eot = int(tokenizer.eos_id)
        self.literal = getattr(tokenizer, "eos_token", None)
        self.by_literal = splits_by_literal(tokenizer)
        self.fallbacks = 0  # batches whose literal split failed its check and were encoded document by document
        self.by_backend: dict[str, int] = {}

    def _backend(self):
        tokenizer = self.tokenizer
        return getattr(tokenizer, "current", lambda: tokenizer)()  # an UpgradingTokenizer's backend of the moment

    def _ends(self, texts: list[str], ids: np.ndarray) -> np.ndarray | None:
        """Index in `ids` of each document's closing end-of-text id, or None when it cannot be told apart."""
        eots = np.flatnonzero(ids == self.eot)
        if not self.by_literal:
            return None if len(eots) != len(texts) else eots
        inside = np.fromiter((t.count(self.literal) for t in texts), np.int64, len(texts)) if self.literal \
            else np.zeros(len(texts), np.int64)
        closing = np.cumsum(inside + 1) - 1
        if len(eots) != int(closing[-1]) + 1:
            return None
        return eots[closing]

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(tokens with the eot before each document, lengths) for `texts` (not empty)."""
        backend = self._backend()
        ids = backend.encode_docs(texts)
        ends = self._ends(texts, ids)
        if ends is None:  # encode each document on its own: its ids end with its one closing eot
            self.fallbacks += 1
            parts = [backend.encode_docs([text]) for text in texts]
            ids = np.concatenate(parts)
            ends = np.cumsum([len(p) for p in parts]) - 1
        self.by_backend[backend.backend] = self.by_backend.get(backend.backend, 0) + len(texts)
        lengths = np.diff(ends, prepend=-1).astype(np.int64)
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


"""Where each document ends in a batch's ids: what document boundaries (the loader's `boundaries`, `bos`,
`align_rows`) and the token shards of `fwe tokenize` are cut by.

A tokenizer encodes a batch of documents to one array, ids(doc0) + [eot] + ids(doc1) + [eot] + ... Each document's
length comes from where its own end-of-text token sits, which needs care: a text holding the literal end-of-text
string (GPT-2's "<|endoftext|>") encodes it to the end-of-text id, inside the document. `splits_by_literal` says when
that literal is the only way the id can appear (no normalizer, the token is not single-word, no other added token
contains it); then document i ends at its (1 + occurrences of the literal)-th end-of-text id, and the total is
checked. Otherwise, or when the check fails, each document is encoded on its own (exact, slower).
"""

from __future__ import annotations

import numpy as np


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


class DocEnds:
    """Encodes documents with their lengths, for one tokenizer (its backend of the moment is passed to `encode`)."""

    def __init__(self, tokenizer):
        self.eot = int(tokenizer.eos_id)
        self.literal = getattr(tokenizer, "eos_token", None)
        self.by_literal = splits_by_literal(tokenizer)
        self.fallbacks = 0
        """Batches whose split by the literal failed its check and were encoded document by document."""

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

    def encode(self, backend, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(ids(doc0) + [eot] + ids(doc1) + [eot] + ..., each document's length with its end-of-text) for `texts`
        (not empty), encoded by `backend`."""
        ids = backend.encode_docs(texts)
        ends = self._ends(texts, ids)
        if ends is None:  # encode each document on its own: its ids end with its one closing eot
            self.fallbacks += 1
            parts = [backend.encode_docs([text]) for text in texts]
            ids = np.concatenate(parts)
            ends = np.cumsum([len(p) for p in parts]) - 1
        return ids, np.diff(ends, prepend=-1).astype(np.int64)

"""Cut the concatenated token stream into [batch_size, seq_len] int32 batches.

Tokens arrive as arrays (one per doc batch) and are copied once into a preallocated batch buffer; no
per-token Python work. Nothing is dropped or repeated; only a final partial batch is left unemitted.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np


class Packer:
    def __init__(self, seq_len: int, batch_size: int):
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.batch_tokens = seq_len * batch_size
        self._buf = np.empty(self.batch_tokens, dtype=np.int32)
        self._fill = 0

    def add(self, ids: np.ndarray) -> Iterator[tuple[np.ndarray, int]]:
        """Append ids; yield (batch, ids of this call in it and earlier batches) for every batch that becomes full.
        Each yielded array is a fresh buffer."""
        pos, n = 0, len(ids)
        while pos < n:
            take = min(self.batch_tokens - self._fill, n - pos)
            self._buf[self._fill : self._fill + take] = ids[pos : pos + take]
            self._fill += take
            pos += take
            if self._fill == self.batch_tokens:
                batch = self._buf.reshape(self.batch_size, self.seq_len)
                self._buf = np.empty(self.batch_tokens, dtype=np.int32)
                self._fill = 0
                yield batch, pos

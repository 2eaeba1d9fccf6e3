"""Cut the token stream into [batch_size, seq_len] batches, as a trainer takes them.

Tokens arrive as arrays (one per document batch, with each document's length and first position) and are copied
once into preallocated buffers; no per-token Python work. What a batch is:
- plain: the int32 array [B, T], the stream cut in order; nothing dropped or repeated but a final partial batch;
- `labels`: {"input", "labels"} cut from windows of B*T + 1 tokens that overlap the next by one token (labels are
  the inputs shifted by one: every token of the stream is an input once and a label once, none lost);
- `boundaries`: also "positions" (each token's index within its document) and "cu_seqlens" ([B, T + 1]: row r's
  segment starts within the row, then T, padded by repeating T), a segment being a document or the part of it in
  the row.
How rows are filled (`pack`, config.PACKINGS): "stream" cuts the stream wherever a row ends; "greedy" starts every row
at a document and fills it with whole documents in stream order, cropping the one that does not fit (its rest dropped);
"best-fit" fills every row from a buffer of documents (fwe_cli.loader.rows.best_fit), cropping only when none fits. Rows
that start at documents are T + 1 tokens with labels (input and labels from the same row). Crops are counted in
`cropped_tokens` / `cropped_documents`.
Each batch comes with its position: the document batch to read from again ({"doc"}: the `tag` its tokens were added
with), the tokens of it already in this or earlier batches ("skip", dropped ones included) and, with best-fit, the
buffer's mark ("pack"): a stream resumed there goes on with the next batch (pipeline.producer).
"""

from __future__ import annotations

from collections import deque
from typing import Iterator

import numpy as np

from fwe_cli.loader.rows.best_fit import BestFit


def segments(lengths: np.ndarray, offsets: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, starts) of `total` tokens made of documents of `lengths` whose first token is at position
    `offsets` within its document: each token's index in its document, and where a document begins."""
    first = np.cumsum(lengths) - lengths
    positions = np.arange(total, dtype=np.int32) - np.repeat(first - offsets, lengths).astype(np.int32)
    starts = np.zeros(total, dtype=bool)
    starts[first[lengths > 0]] = True
    return positions, starts


def row_bounds(starts: np.ndarray) -> np.ndarray:
    """cu_seqlens [B, T + 1] of rows whose document starts are `starts` [B, T]: each row's segment starts (0 always),
    then T, padded by repeating T."""
    rows, width = starts.shape
    out = np.full((rows, width + 1), width, dtype=np.int32)
    for r in range(rows):
        cuts = np.flatnonzero(starts[r])
        if not len(cuts) or cuts[0] != 0:
            cuts = np.concatenate(([0], cuts))
        out[r, :len(cuts)] = cuts
    return out


class Packer:
    """Batches of one shape and kind (see the module docstring); `add` may be called with arrays of any size."""

    def __init__(self, seq_len: int, batch_size: int, labels: bool = False, boundaries: bool = False,
                 pack: str = "stream", pack_buffer: int = 1, resume: dict | None = None):
        self.seq_len, self.batch_size = seq_len, batch_size
        self.labels, self.boundaries, self.pack = labels, boundaries, pack
        self.align_rows = pack != "stream"
        self.row = seq_len + 1 if labels and self.align_rows else seq_len
        self.window = self.row * batch_size + (1 if labels and not self.align_rows else 0)
        self._fit = BestFit(self.row, pack_buffer, resume) if pack == "best-fit" else None
        # best-fit: per add, its first document's sequence number, tag, skip, and its documents' token starts and end
        self._tags: deque[tuple[int, object, int, np.ndarray]] = deque()
        self.cropped_tokens = 0  # left out at the rows' ends, by either packing that starts rows at documents
        self.cropped_documents = 0
        self._fill = 0
        self._new()

    def _new(self) -> None:
        self._ids = np.empty(self.window, dtype=np.int32)
        self._pos = np.empty(self.window, dtype=np.int32) if self.boundaries else None
        self._starts = np.zeros(self.window, dtype=bool) if self.boundaries else None

    def add(self, ids: np.ndarray, lengths: np.ndarray | None = None, offsets: np.ndarray | None = None,
            tag: object = None, skipped: int = 0) -> Iterator[tuple[object, dict]]:
        """Append ids (with each document's length and first position, which boundaries and rows that start at
        documents need) of the document batch `tag`, its first `skipped` tokens already left out; yield (batch,
        position) for every batch that becomes full. Each batch is a fresh buffer."""
        if self._fit is not None:
            yield from self._add_best_fit(ids, lengths, offsets, tag, skipped)
            return
        positions = starts = None
        if self.boundaries:  # the per-token arrays only a batch with boundaries carries
            positions, starts = segments(lengths, offsets, len(ids))
        cut = self._add_rows(ids, lengths, positions, starts) if self.align_rows else \
            self._add_stream(ids, positions, starts)
        for batch, used in cut:
            yield batch, {"doc": tag, "skip": skipped + used}

    def finish(self) -> Iterator[tuple[object, dict]]:
        """The stream has ended: the batches a best-fit buffer still fills (none for the other packings)."""
        if self._fit is not None:
            yield from self._placed(self._fit.finish())

    def _put(self, ids, positions, starts, lo: int, take: int) -> None:
        at = self._fill
        self._ids[at:at + take] = ids[lo:lo + take]
        if self.boundaries:
            self._pos[at:at + take] = positions[lo:lo + take]
            self._starts[at:at + take] = starts[lo:lo + take]
        self._fill += take

    def _add_stream(self, ids, positions, starts) -> Iterator[tuple[object, int]]:
        pos, n = 0, len(ids)
        while pos < n:
            take = min(self.window - self._fill, n - pos)
            self._put(ids, positions, starts, pos, take)
            pos += take
            if self._fill == self.window:
                yield self._batch(), pos - (1 if self.labels else 0)  # the window's last token opens the next one
                self._carry()

    def _add_rows(self, ids, lengths, positions, starts) -> Iterator[tuple[object, int]]:
        pos = 0
        for length in lengths.tolist():
            room = self.row - self._fill % self.row
            take = min(length, room)
            self._put(ids, positions, starts, pos, take)
            self._crop(length, take)
            pos += length
            if self._fill == self.window:
                yield self._batch(), pos
                self._carry()

    def _add_best_fit(self, ids, lengths, offsets, tag, skipped) -> Iterator[tuple[object, dict]]:
        starts = np.concatenate(([0], np.cumsum(lengths)))  # each document's first token in `ids`, then the end
        self._tags.append((self._fit.read, tag, skipped, starts))
        yield from self._placed(self._fit.add(ids, lengths, offsets))

    def _placed(self, pieces) -> Iterator[tuple[object, dict]]:
        """Best-fit's pieces into the rows; (batch, position) for each batch filled."""
        for doc, take, _full in pieces:
            self._crop(len(doc.ids), take)
            at = self._fill
            self._ids[at:at + take] = doc.ids[:take]
            if self.boundaries:
                self._pos[at:at + take] = np.arange(doc.offset, doc.offset + take, dtype=np.int32)
                self._starts[at] = True
            self._fill += take
            if self._fill == self.window:
                yield self._batch(), self._fit_position()
                self._carry()

    def _crop(self, length: int, take: int) -> None:
        """A document of `length` tokens placed `take` of them: count the rest, if any, as cropped."""
        if take < length:
            self.cropped_tokens += length - take
            self.cropped_documents += 1

    def _fit_position(self) -> dict:
        """A best-fit batch's position: the document batch holding the oldest document still buffered (or, with none
        held, the next to read), the tokens before that document in it, and the buffer's mark."""
        mark = self._fit.mark()
        tags = self._tags
        while len(tags) > 1 and tags[1][0] <= mark.at:
            tags.popleft()
        first, tag, skipped, starts = tags[0]
        return {"doc": tag, "skip": skipped + int(starts[min(mark.at - first, len(starts) - 1)]),
                "pack": mark.to_json()}

    def _carry(self) -> None:
        """A fresh buffer; with labels and a stream, it starts with the window's last token."""
        ids, positions, starts = self._ids, self._pos, self._starts
        self._new()
        self._fill = 0
        if self.labels and not self.align_rows:
            self._put(ids, positions, starts, len(ids) - 1, 1)

    def _batch(self) -> object:
        b, t = self.batch_size, self.seq_len
        if not (self.labels or self.boundaries):
            return self._ids.reshape(b, t)
        rows = self._ids.reshape(b, self.row) if self.align_rows else None
        take = (lambda a: a.reshape(b, self.row)[:, :t]) if self.align_rows else (lambda a: a[:b * t].reshape(b, t))
        batch = {"input": take(self._ids)}
        if self.labels:
            batch["labels"] = rows[:, 1:] if self.align_rows else self._ids[1:].reshape(b, t)
        if self.boundaries:
            batch["positions"] = take(self._pos)
            batch["cu_seqlens"] = row_bounds(take(self._starts))
        return batch

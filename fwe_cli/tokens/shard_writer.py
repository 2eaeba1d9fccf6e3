"""Write one token shard crash-safely: streamed to `NAME.bin.partial`, its index to `NAME.idx.npy.partial`, both
fsynced, then renamed (index first, shard last) and the directory fsynced. A file under its final name is whole;
the manifest lists it only after that (fwe_cli/tokens/run.py), so a run killed anywhere leaves at most files a
re-run deletes and writes again, identically (the bytes depend only on the documents and the tokenizer).

Memory stays flat: tokens go to the file as they come (header first as zeros, rewritten with the count at the end),
only the document offsets (8 bytes per document) are kept until the index is written.
"""

from __future__ import annotations

import io
import os
from typing import Callable

import numpy as np

from fwe_cli.loader.files.token_shards import HEADER_BYTES, header, index_path
from fwe_cli.output.manifest_file import fsync_dir
from fwe_cli.output.os_errors import on_output
from fwe_cli.output.verify import sha256_file
from fwe_cli.tokens.layout import PARTIAL_SUFFIX

_BUFFER = 8 << 20


def sha256_of(path: str) -> str:
    """sha256_file (what verification compares against), an OSError as the one-line output error."""
    with on_output("read back", path):
        return sha256_file(path)


class ShardWriter:
    """`add(tokens, lengths)` whole documents (each starting with its eot); `finish()` makes the shard final."""

    def __init__(self, path: str, version: int):
        self.path = path
        self.index = index_path(path)
        self.partial = path + PARTIAL_SUFFIX
        self.index_partial = self.index + PARTIAL_SUFFIX
        self.version = version
        self.tokens = 0
        self._offsets: list[np.ndarray] = []
        self.documents = 0
        with on_output("create", self.partial):
            self._file: io.BufferedWriter | None = open(self.partial, "wb", buffering=_BUFFER)
            self._file.write(bytes(HEADER_BYTES))

    def add(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Append documents: `tokens` are theirs back to back, `lengths` their sizes (summing to len(tokens))."""
        if not len(lengths):
            return
        starts = np.empty(len(lengths), dtype=np.int64)
        starts[0] = self.tokens
        np.cumsum(lengths[:-1], out=starts[1:])
        starts[1:] += self.tokens
        self._offsets.append(starts)
        with on_output("write", self.partial):
            self._file.write(memoryview(np.ascontiguousarray(tokens)).cast("B"))
        self.tokens += len(tokens)
        self.documents += len(lengths)

    def finish(self, before_rename: Callable[[], None] = lambda: None,
               after_rename: Callable[[], None] = lambda: None) -> dict:
        """Write the header, the index, fsync both, rename them; the manifest entry of the shard."""
        handle, self._file = self._file, None
        with on_output("write", self.partial):
            handle.seek(0)
            handle.write(header(self.tokens, self.version))
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        offsets = np.concatenate(self._offsets) if self._offsets else np.empty(0, dtype=np.int64)
        with on_output("write", self.index_partial), open(self.index_partial, "wb") as index:
            np.save(index, offsets, allow_pickle=False)
            index.flush()
            os.fsync(index.fileno())
        entry = {"name": os.path.basename(self.path), "tokens": self.tokens, "documents": self.documents,
                 "bytes": os.path.getsize(self.partial), "sha256": sha256_of(self.partial),
                 "index": os.path.basename(self.index), "index_bytes": os.path.getsize(self.index_partial),
                 "index_sha256": sha256_of(self.index_partial)}
        before_rename()
        with on_output("rename", self.index):
            os.replace(self.index_partial, self.index)
        with on_output("rename", self.path):
            os.replace(self.partial, self.path)
        fsync_dir(os.path.dirname(self.path))
        after_rename()
        return entry

    def abandon(self) -> None:
        """Close and delete the partial files (a stop between checkpoints: the next run writes this shard again)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
        for path in (self.partial, self.index_partial):
            try:
                os.remove(path)
            except OSError:
                pass

"""The warm head cache: the first bytes the native Hub reader fetched (footers, first row groups), kept on disk.

A warm start then tokenizes its first batch from local disk while the read-ahead thread goes on to the network for
the row groups after the cached ones. Entries are keyed by (repo, commit sha, file path, byte offset): a commit's
files never change, so an entry is valid forever and needs no request to re-validate. The cache keeps at most
`HEAD_CACHE_BYTES` per (repo, commit, config, split) listing, the first ones in stream order, and lives beside the
listings under the Hugging Face cache (`$HF_HUB_CACHE/fwe/heads`), so clearing that cache clears it;
`--no-cache` neither reads nor writes it.
"""

from __future__ import annotations

import hashlib
import os

from fwe_cli.artifacts import write_atomic
from fwe_cli.loader.hub_env import fwe_cache_dir
from fwe_cli.loader.sources.hub_listing import HubListing

# Enough for the footer and the first row groups of FineWeb-Edu's first file (row groups of 1,000 documents),
# which hold far more than a first batch's tokens; small enough to keep per revision without a thought.
HEAD_CACHE_BYTES = 64 * 1024 * 1024


class HeadCache:
    """Byte ranges of one listing's files, read and written by the reader's read-ahead thread only."""

    def __init__(self, listing: HubListing, budget: int = HEAD_CACHE_BYTES):
        key = f"{listing.config or 'default'}\0{listing.split}".encode()
        self.directory = os.path.join(fwe_cache_dir(), "heads", listing.repo.replace("/", "--"), listing.revision,
                                      hashlib.sha256(key).hexdigest()[:16])
        self.budget = budget
        self.hits = 0
        """Ranges served from disk in this run."""
        self.stored = 0
        """Ranges written to disk in this run."""
        self._used = self._size_on_disk()

    def _size_on_disk(self) -> int:
        try:
            return sum(entry.stat().st_size for entry in os.scandir(self.directory) if entry.is_file())
        except OSError:
            return 0

    def _path(self, path: str, start: int, end: int) -> str:
        name = hashlib.sha256(path.encode()).hexdigest()[:24]
        return os.path.join(self.directory, f"{name}.{start}-{end}.bin")

    def get(self, path: str, start: int, end: int) -> bytes | None:
        """Bytes [start, end) of `path` when cached whole, else None (a damaged entry counts as absent)."""
        try:
            with open(self._path(path, start, end), "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        if len(data) != end - start:
            return None
        self.hits += 1
        return data

    def put(self, path: str, start: int, data: bytes) -> bool:
        """Keep `data` (bytes at `start` of `path`) while the budget allows; False once it is spent.

        A failed write (read-only or full disk) only costs the next warm start its head start."""
        if self._used + len(data) > self.budget:
            return False
        try:
            write_atomic(self._path(path, start, start + len(data)), data)
        except OSError:
            return False
        self._used += len(data)
        self.stored += 1
        return True

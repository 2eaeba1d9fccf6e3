"""The warm head cache: what the native Hub reader needs to start a stream again without the network or pyarrow.

It holds three kinds of entries for one (repo, commit, config, split) listing:
- footers: the bytes of a file's parquet footer, as fetched (`get` / `put`);
- rows: the decoded columns of the stream's first row groups, in stream order (`get_rows` / `put_rows`), kept apart
  for each set of columns read (`text`/`id`, and a row filter's: sources.where), so a reader never takes rows that lack
  a column it filters on;
- named entries (`entry` / `put_entry`): the stream's first packed batches per tokenizer and shape
  (hub.first_batches), which a warm start hands over before it has loaded a tokenizer.

A warm start hands the cached rows to the tokenizer straight from disk (orjson, no pyarrow: importing pyarrow costs
a warm start more CPU than the rest of its open), while the read-ahead thread goes on to the footer and the network
for the row groups after them. A commit's files never change, so entries are valid forever and need no request to
re-validate. The cache keeps at most `HEAD_CACHE_BYTES` per listing, the first entries in stream order, under the
Hugging Face cache (`$HF_HUB_CACHE/fwe/heads`), so clearing that cache clears it; `--no-cache` neither reads nor
writes it.
"""

from __future__ import annotations

import hashlib
import os
import threading

import orjson

from fwe_cli.artifacts import write_atomic
from fwe_cli.loader.hub.listing import HubListing
from fwe_cli.loader.remote.hub_env import fwe_cache_dir

# Room for the footers and the first row groups of FineWeb-Edu's first file (1,000 documents per row group, ~5 MB
# decoded), which hold far more than a first batch's tokens; small enough to keep per revision without a thought.
HEAD_CACHE_BYTES = 64 * 1024 * 1024
HEAD_CACHE_FORMAT = 3  # 1 kept the row groups' compressed bytes; 2 decoded; 3 with each one's extent in its file
TEXT_COLUMNS = ("text", "id")  # what a reader without a filter reads (its rows are kept under the plain names)


class HeadCache:
    """Footers and first row groups of one listing's files. The read-ahead thread and the consumer both use it."""

    def __init__(self, listing: HubListing, budget: int = HEAD_CACHE_BYTES):
        key = f"{listing.config or 'default'}\0{listing.split}".encode()
        self.directory = os.path.join(fwe_cache_dir(), "heads", f"v{HEAD_CACHE_FORMAT}",
                                      listing.repo.replace("/", "--"), listing.revision,
                                      hashlib.sha256(key).hexdigest()[:16])
        self.budget = budget
        self.hits = 0
        """Entries served from disk in this run."""
        self.stored = 0
        """Entries written to disk in this run."""
        self._used: int | None = None  # bytes on disk, counted on the first write (a warm start may never write)
        self._lock = threading.Lock()

    def _path(self, path: str, suffix: str) -> str:
        return os.path.join(self.directory, f"{hashlib.sha256(path.encode()).hexdigest()[:24]}.{suffix}")

    def _load(self, name: str) -> bytes | None:
        try:
            with open(name, "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def _store(self, name: str, data: bytes) -> bool:
        """Write one entry (replacing one of that name) while the budget allows; False once it is spent or the write
        fails (a read-only or full disk only costs the next warm start its head start)."""
        with self._lock:
            if self._used is None:
                try:
                    self._used = sum(e.stat().st_size for e in os.scandir(self.directory) if e.is_file())
                except OSError:
                    self._used = 0
            try:
                replaced = os.path.getsize(name)
            except OSError:
                replaced = 0
            if self._used - replaced + len(data) > self.budget:
                return False
            try:
                write_atomic(name, data)
            except OSError:
                return False
            self._used += len(data) - replaced
            self.stored += 1
            return True

    def _hit(self) -> None:
        with self._lock:
            self.hits += 1

    def get(self, path: str, start: int, end: int) -> bytes | None:
        """Bytes [start, end) of `path` when cached whole (a footer), else None (a damaged entry counts as absent)."""
        data = self._load(self._path(path, f"{start}-{end}.bin"))
        if data is None or len(data) != end - start:
            return None
        self._hit()
        return data

    def put(self, path: str, start: int, data: bytes) -> bool:
        """Keep `data` (bytes at `start` of `path`)."""
        return self._store(self._path(path, f"{start}-{start + len(data)}.bin"), data)

    def _rows_path(self, path: str, group: int, columns: tuple[str, ...]) -> str:
        if columns == TEXT_COLUMNS:
            return self._path(path, f"rg{group}.json")
        read = hashlib.sha256("\0".join(columns).encode()).hexdigest()[:12]
        return self._path(path, f"rg{group}.{read}.json")

    def get_rows(self, path: str, group: int,
                 columns: tuple[str, ...] = TEXT_COLUMNS) -> tuple[dict[str, list], bool, tuple[int, int]] | None:
        """(columns, whether it is the file's last row group, its extent in the file's bytes: sources.units) of row
        group `group` of `path` as kept by a reader of `columns`, or None."""
        data = self._load(self._rows_path(path, group, columns))
        try:
            entry = orjson.loads(data) if data is not None else None
        except orjson.JSONDecodeError:
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("columns"), dict) or \
                not isinstance(entry.get("extent"), list):
            return None
        self._hit()
        return entry["columns"], bool(entry.get("last")), tuple(entry["extent"])

    def has_rows(self, path: str, group: int, columns: tuple[str, ...] = TEXT_COLUMNS) -> bool:
        """Whether row group `group` of `path` is kept for a reader of `columns` (without reading it)."""
        return os.path.isfile(self._rows_path(path, group, columns))

    def put_rows(self, path: str, group: int, columns: dict[str, list], last: bool, extent: tuple[int, int],
                 read: tuple[str, ...] = TEXT_COLUMNS) -> bool:
        """Keep row group `group` of `path` decoded (with its `extent` in the file's bytes), for readers of the columns
        `read`; callers keep only a stream's first row groups, in order."""
        return self._store(self._rows_path(path, group, read),
                           orjson.dumps({"columns": columns, "last": last, "extent": list(extent)}))

    def entry(self, name: str) -> bytes | None:
        """A named entry of this listing (the kept first batches: hub.first_batches), or None."""
        data = self._load(os.path.join(self.directory, name))
        if data is not None:
            self._hit()
        return data

    def has_entry(self, name: str) -> bool:
        return os.path.isfile(os.path.join(self.directory, name))

    def put_entry(self, name: str, data: bytes) -> bool:
        """Keep (or replace) a named entry."""
        return self._store(os.path.join(self.directory, name), data)

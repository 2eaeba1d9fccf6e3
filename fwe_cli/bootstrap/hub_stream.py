"""`fwe bootstrap` from the Hub, natively: fetch the config's parquet files (fwe_cli/bootstrap/hub_download.py, how
each file is read: hub_file_reads.py) and convert each row group to JSONL as soon as its bytes have landed
(fwe_cli/bootstrap/hub_convert.py), on threads of this process or, with `--workers N`, on N processes.

`HubFileStream` stands where a source's Records stand for the other sources (fwe_cli/bootstrap/run.py reads either):
it yields (None, JSONL line), already encoded, in the order `datasets` reads the files (listing order, row groups
and rows in file order), so the output is byte-identical to `--hub-reader datasets`. Its position after a line:

    {"index": good rows yielded, "file": k, "group": g, "row": rows of group g read}   (k: among this node's files)

Memory: a few row groups being converted or waiting to be written; disk: at most `ahead` files being fetched or
converted (sparse: only what has landed), each deleted once converted. The footers of the files ahead are fetched
first, so the target decides from their sizes which files and row groups are fetched at all (hub_file_reads.py).

Multi-node: this node's files are those at listing positions i with i % shard.mod == shard.rem -- whole files,
so a node downloads only its own (the `datasets` reader and the other sources split by document instead).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future
from typing import Callable

from fwe_cli.bootstrap.config import BootstrapConfig
from fwe_cli.bootstrap.hub_convert import convert_group, watch_parent
from fwe_cli.bootstrap.hub_download import CONNECTIONS, Fetcher, remove_tree
from fwe_cli.bootstrap.hub_file_reads import FileRead
from fwe_cli.bootstrap.hub_window import FileWindow, mismatched
from fwe_cli.errors import OutputError, SourceError
from fwe_cli.hostinfo import usable_cores
from fwe_cli.loader.hub.listing import HubListing
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.output.disk_preflight import preflight_disk

TASKS_PER_WORKER = 2
MAX_THREADS = 4  # converting threads (the default): decoding releases the GIL, serializing holds it


def _warm() -> None:
    import pyarrow.parquet  # noqa: F401  the import a worker's first task would otherwise pay


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class HubFileStream:
    """This node's files of a Hub listing as JSONL lines, from an optional saved position.

    `workers`: None converts on threads of this process, 0 in the calling thread, N > 0 on N processes."""

    encoded = True
    revision_pinned = True

    def __init__(self, listing: HubListing, shard, directory: str, fields: str, strict: bool,
                 start: dict | None = None, bad: BadRecords | None = None, workers: int | None = None,
                 ahead: int = 2, remaining: int | None = None, connections: int = CONNECTIONS):
        self.listing, self.revision, self.directory = listing, listing.revision, directory
        self.owned = [i for i in range(len(listing.files)) if i % shard.mod == shard.rem]
        self.files = [listing.files[i] for i in self.owned]
        self.fields, self.strict, self.ahead, self.connections = fields, strict, max(1, ahead), connections
        self.workers = workers
        self.bad = bad if bad is not None else BadRecords()
        start = start or {}
        self._index, self._file = int(start.get("index", 0)), int(start.get("file", 0))
        self._group, self._row = int(start.get("group", 0)), int(start.get("row", 0))
        self._next = (self._file, self._group, self._row)
        self._groups: dict[int, list[int]] = {}  # file -> rows per row group
        self.remaining = remaining  # output bytes still wanted: what is fetched at all follows from it
        self._fetcher: Fetcher | None = None
        self._window: FileWindow | None = None
        self._pool = None
        self._entries = [{"index": i, "path": f.path, "bytes": f.size, "sha256": f.sha256}
                         for i, f in zip(self.owned, self.files)]
        self.on_file: Callable[[int], None] = lambda k: None
        """Called with k before the first line of this node's file k (read from its start) is yielded."""

    def manifest_fields(self) -> dict:
        """What the manifest records about the source: reader, revision, the listing read and this node's files.
        A file read only in part gets `row_groups` in its `hub_files` entry (the entries of `bind`), as it is read."""
        return {"hub_reader": "native", "hub_files_total": len(self.listing.files),
                "hub_listing": [{"path": f.path, "bytes": f.size, "sha256": f.sha256} for f in self.listing.files],
                "hub_files": self._entries}

    def bind(self, entries: list[dict]) -> None:
        """Record what is read into these `hub_files` entries (a resumed manifest's own)."""
        self._entries = entries

    def next_document(self) -> dict | None:
        """Where the first document not yet yielded is: {"file": its listing index, "group", "row": rows of that
        group before it, "index": good documents yielded}, past row groups and files already read whole; None
        when this node's files are all read."""
        k, g, row = self._file, self._group, self._row
        rows = self._groups.get(k)
        if rows is not None and g < len(rows) and row >= rows[g]:
            g, row = g + 1, 0
        if rows is not None and g >= len(rows):
            k, g, row = k + 1, 0, 0
        if k >= len(self.files):
            return None
        return {"file": self.owned[k], "group": g, "row": row, "index": self._index}

    def open(self) -> "HubFileStream":
        if self._fetcher is not None:
            return self
        if not self.files:
            raise SourceError(f"this node owns none of the {len(self.listing.files)} files of {self.listing.repo} "
                              f"({self.listing.config}, {self.listing.split}): use at most that many nodes")
        self._fetcher = Fetcher(self.directory, self.connections)
        self._window = FileWindow(self.listing.repo, self.revision, self.files, self._fetcher, self.fields, self.ahead,
                                  self.connections, self.remaining, self._next, self._record)
        if self.workers is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(min(MAX_THREADS, usable_cores()), thread_name_prefix="fwe-hub-convert")
        elif self.workers > 0:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=watch_parent, initargs=(os.getpid(),))
            for _ in range(self.workers):  # start the workers now, while the first footers download
                self._pool.submit(_warm)
        self._window.admit()
        return self

    def position(self) -> dict:
        return {"index": self._index, "file": self._file, "group": self._group, "row": self._row}

    def fingerprint(self) -> None:
        return None

    def _submit(self, read: FileRead, group: int, start: int) -> Future:
        path, key = read.download.path, read.download.key
        if self._pool is None:
            return _done(convert_group(path, group, start, self.fields, False, key))
        return self._pool.submit(convert_group, path, group, start, self.fields, self.workers is not None, key)

    def _record(self, k: int, read: FileRead) -> None:
        """What was converted of file k, not checked whole: its row groups' sha256 in the manifest entry."""
        entry = self._entries[k]
        entry["row_groups"] = [*entry.get("row_groups", []), *read.row_group_records()]

    def _results(self):
        """(file, group, start row, (lines, bad rows, rows)) in order, keeping the converters busy meanwhile."""
        pending: deque = deque()
        window = self._window
        limit = max(1, self.workers or min(MAX_THREADS, usable_cores())) * TASKS_PER_WORKER
        while True:
            while len(pending) < limit and (task := window.take(block=not pending)) is not None:
                k, g, start, read = task
                self._groups[k] = read.rows
                pending.append((k, g, start, self._submit(read, g, start)))
            if not pending:
                return
            k, g, start, future = pending.popleft()
            try:
                result = future.result()
            except SourceError:
                raise
            except Exception as exc:  # a worker that died (BrokenProcessPool), or pyarrow's own errors
                raise SourceError(f"converting {self.files[k].path} row group {g} failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
            lines = result[0] if isinstance(result[0], list) else result[0].splitlines(keepends=True)
            window.converted(k, g, start, sum(map(len, lines)))
            window.finish_below(k + 1 if window.next[0] > k and not (pending and pending[0][0] == k) else k)
            yield k, g, start, (lines, result[1], result[2])

    # -- iteration --------------------------------------------------------------------------------------
    def __iter__(self):
        self.open()
        for k, g, start, (lines, bad, rows) in self._results():
            if (g, start) == (0, 0):
                self.on_file(k)
            self._file, self._group, self._row = k, g, start
            if bad:
                yield from self._with_bad(k, g, start, lines, bad, rows)
                continue
            for row, line in enumerate(lines, start + 1):
                self._row = row
                self._index += 1
                yield None, line
            self._row = rows

    def _with_bad(self, k: int, g: int, start: int, lines: list[bytes], bad: list, rows: int):
        skipped = {row for row, _ in bad}
        good = (row for row in range(start, rows) if row not in skipped)
        queue = deque(bad)
        for row, line in zip(good, lines):
            while queue and queue[0][0] < row:
                self._bad(k, g, *queue.popleft())
            self._row = row + 1
            self._index += 1
            yield None, line
        while queue:
            self._bad(k, g, *queue.popleft())
        self._row = rows

    def _bad(self, k: int, g: int, row: int, reason: str) -> None:
        in_file = sum(self._groups[k][:g]) + row + 1
        where = f"{self.listing.repo}/{self.files[k].path}:row{in_file}"
        self.bad.reject(where, reason, self.strict)

    def close(self) -> None:
        """Stop fetching and converting; what was converted of a file not finished is recorded, its download
        deleted (a resume fetches again what it needs)."""
        if self._fetcher is None:
            return
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._window.close()
        self._fetcher.close()

    def discard(self) -> None:
        """The bootstrap is complete: delete the download folder."""
        self.close()
        remove_tree(self.directory)


def open_hub_files(config: BootstrapConfig, directory: str, manifest: dict | None) -> HubFileStream:
    """The native Hub stream of a new run (listing of the default branch now) or of a resumed one (the listing
    at the manifest's revision, which must list the same files for this node)."""
    from fwe_cli.loader.flow.in_background import import_in_background
    from fwe_cli.loader.hub.listing import resolve_listing
    from fwe_cli.loader.remote.http import preconnect
    from fwe_cli.loader.remote.hub_env import endpoint

    resume = manifest["resume"] if manifest else None
    spec = config.source.options
    preconnect(endpoint(), CONNECTIONS)  # their handshakes, and pyarrow's import (footers need it), overlap the listing
    import_in_background("pyarrow.parquet")
    listing = resolve_listing(spec.dataset, spec.name, spec.split,
                              revision=manifest.get("revision") if manifest else None)
    stream = HubFileStream(listing, config.shard, directory, config.fields, config.bad_records == "error",
                           start=resume["position"] if resume else None,
                           bad=BadRecords(**resume["bad_records"]) if resume else None,
                           workers=config.workers, ahead=config.downloads,
                           remaining=config.target_bytes - (resume["bytes"] if resume else 0))
    if manifest is not None:
        started = [{key: v for key, v in f.items() if key not in ("first", "row_groups")}
                   for f in manifest.get("hub_files") or []]
        if started != stream.manifest_fields()["hub_files"]:
            raise OutputError(f"the Hub listing of {spec.dataset} at {listing.revision} no longer has the files this "
                              "bootstrap started with; pass --force to start over")
        stream.bind(manifest["hub_files"])
    bad_download = mismatched(directory)
    if bad_download is not None:
        raise OutputError(f"{bad_download} was downloaded with another sha256 than the Hub listing's, and lines from "
                          "it were written: pass --force to start over")
    largest = sorted((f.size for f in stream.files[stream.position()["file"]:]), reverse=True)
    preflight_disk(os.path.dirname(directory), stream.remaining + sum(largest[:config.downloads + 1]), "the bootstrap",
                   "--gb")
    return stream.open()

"""`fwe bootstrap` from the Hub, natively: download the config's parquet files (fwe_cli/bootstrap/hub_download.py)
and convert their row groups to JSONL on worker processes (fwe_cli/bootstrap/hub_convert.py), both at once.

`HubFileStream` stands where a source's Records stand for the other sources (fwe_cli/bootstrap/run.py reads either):
it yields (None, JSONL line), already encoded, in the order `datasets` reads the files (listing order, row groups
and rows in file order), so the output is byte-identical to `--hub-reader datasets`. Its position after a line:

    {"index": good rows yielded, "file": k, "group": g, "row": rows of group g read}   (k: among this node's files)

Memory: at most 2 x workers row groups are being converted or waiting to be written; disk: at most `ahead`
downloaded files besides the output (each deleted once converted).

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
from fwe_cli.bootstrap.hub_download import Downloads, remove_tree
from fwe_cli.errors import OutputError, SourceError
from fwe_cli.hostinfo import usable_cores
from fwe_cli.loader.sources.hub_listing import HubListing
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.output.disk_preflight import preflight_disk

TASKS_PER_WORKER = 2


def _warm() -> None:
    import pyarrow.parquet  # noqa: F401  the import a worker's first task would otherwise pay


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class HubFileStream:
    """This node's files of a Hub listing as JSONL lines, from an optional saved position."""

    encoded = True
    revision_pinned = True

    def __init__(self, listing: HubListing, shard, directory: str, fields: str, strict: bool,
                 start: dict | None = None, bad: BadRecords | None = None, workers: int | None = None,
                 ahead: int = 2, remaining: int | None = None):
        self.listing, self.revision, self.directory = listing, listing.revision, directory
        self.owned = [i for i in range(len(listing.files)) if i % shard.mod == shard.rem]
        self.files = [listing.files[i] for i in self.owned]
        self.fields, self.strict, self.ahead = fields, strict, ahead
        self.workers = usable_cores() if workers is None else workers
        self.bad = bad if bad is not None else BadRecords()
        start = start or {}
        self._index, self._file = int(start.get("index", 0)), int(start.get("file", 0))
        self._group, self._row = int(start.get("group", 0)), int(start.get("row", 0))
        self._next = (self._file, self._group, self._row)
        self._groups: dict[int, tuple[str, list[int]]] = {}  # file -> (local path, rows per row group)
        self._released = self._file
        self.remaining = remaining  # output bytes still wanted: files the target will not reach are not downloaded
        self._produced = 0  # JSONL bytes converted this run ...
        self._parquet_in = 0.0  # ... from about this many parquet bytes (by rows)
        self._current = (self._file, 0.0)  # (file, fraction of its rows converted)
        self._downloads: Downloads | None = None
        self._pool = None
        self.on_file: Callable[[int], None] = lambda k: None
        """Called with k before the first line of this node's file k (read from its start) is yielded."""

    def manifest_fields(self) -> dict:
        """What the manifest records about the source: reader, revision, the listing read and this node's files."""
        return {"hub_reader": "native", "hub_files_total": len(self.listing.files),
                "hub_listing": [{"path": f.path, "bytes": f.size, "sha256": f.sha256} for f in self.listing.files],
                "hub_files": [{"index": i, "path": f.path, "bytes": f.size, "sha256": f.sha256}
                              for i, f in zip(self.owned, self.files)]}

    def next_document(self) -> dict | None:
        """Where the first document not yet yielded is: {"file": its listing index, "group", "row": rows of that
        group before it, "index": good documents yielded}, past row groups and files already read whole; None
        when this node's files are all read."""
        k, g, row = self._file, self._group, self._row
        rows = self._groups[k][1] if k in self._groups else None
        if rows is not None and g < len(rows) and row >= rows[g]:
            g, row = g + 1, 0
        if rows is not None and g >= len(rows):
            k, g, row = k + 1, 0, 0
        if k >= len(self.files):
            return None
        return {"file": self.owned[k], "group": g, "row": row, "index": self._index}

    def open(self) -> "HubFileStream":
        if self._downloads is not None:
            return self
        if not self.files:
            raise SourceError(f"this node owns none of the {len(self.listing.files)} files of {self.listing.repo} "
                              f"({self.listing.config}, {self.listing.split}): use at most that many nodes")
        self._downloads = Downloads(self.listing.repo, self.revision, self.files, self.directory, self.ahead,
                                    first=self._file, wanted=self._wanted)
        if self.workers > 0:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=watch_parent, initargs=(os.getpid(),))
            for _ in range(self.workers):  # start the workers now, while the first file downloads
                self._pool.submit(_warm)
        return self

    def position(self) -> dict:
        return {"index": self._index, "file": self._file, "group": self._group, "row": self._row}

    def fingerprint(self) -> None:
        return None

    # -- scheduling -------------------------------------------------------------------------------------
    def _wanted(self, index: int) -> bool:
        """Whether file `index` may still be needed: the JSONL expected from the files before it (at the
        JSONL/parquet ratio seen so far) does not reach the target yet."""
        if self.remaining is None or not self._parquet_in:
            return True
        k, fraction = self._current
        left = self.files[k].size * (1 - fraction) + sum(f.size for f in self.files[k + 1:index])
        return self._produced + left * self._produced / self._parquet_in < self.remaining

    def _count(self, k: int, start: int, jsonl: bytes, rows: int) -> None:
        counts = self._groups[k][1]
        self._produced += len(jsonl)
        self._parquet_in += self.files[k].size * (rows - start) / sum(counts)
        fraction = self._current[1] if self._current[0] == k else 0.0
        self._current = (k, fraction + (rows - start) / sum(counts))

    def _take_task(self, block: bool) -> tuple[int, int, int, str] | None:
        """The next (file, group, start row, path) to convert; None at the end, or (not `block`) when the next
        file is still downloading."""
        k, g, start = self._next
        while k < len(self.files):
            if k not in self._groups:
                if not block and not self._downloads.done(k):
                    self._next = (k, g, start)
                    return None
                path = self._downloads.wait(k)
                import pyarrow.parquet as pq

                meta = pq.read_metadata(path)
                self._groups[k] = (path, [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
            path, rows = self._groups[k]
            if g >= len(rows):
                k, g, start = k + 1, 0, 0
            elif start >= rows[g]:
                g, start = g + 1, 0
            else:
                self._next = (k, g + 1, 0)
                return k, g, start, path
        self._next = (k, g, start)
        return None

    def _submit(self, path: str, group: int, start: int) -> Future:
        if self._pool is None:
            return _done(convert_group(path, group, start, self.fields))
        return self._pool.submit(convert_group, path, group, start, self.fields)

    def _results(self):
        """(file, group, start row, (jsonl, bad rows, rows)) in order, keeping the workers busy meanwhile."""
        pending: deque = deque()
        limit = max(1, self.workers) * TASKS_PER_WORKER
        while True:
            while len(pending) < limit and (task := self._take_task(block=not pending)) is not None:
                k, g, start, path = task
                pending.append((k, g, start, self._submit(path, g, start)))
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
            self._count(k, start, result[0], result[2])
            last = k + 1 if self._next[0] > k and not (pending and pending[0][0] == k) else k
            while self._released < last:  # every group of these files is converted: their downloads can go
                self._downloads.release(self._released)
                self._released += 1
            yield k, g, start, result

    # -- iteration --------------------------------------------------------------------------------------
    def __iter__(self):
        self.open()
        for k, g, start, (jsonl, bad, rows) in self._results():
            if (g, start) == (0, 0):
                self.on_file(k)
            self._file, self._group, self._row = k, g, start
            lines = jsonl.splitlines(keepends=True)  # orjson escapes \n and \r inside strings
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
        in_file = sum(self._groups[k][1][:g]) + row + 1
        where = f"{self.listing.repo}/{self.files[k].path}:row{in_file}"
        self.bad.reject(where, reason, self.strict)

    def close(self) -> None:
        """Stop downloading and converting; partial downloads stay for a resume."""
        if self._downloads is not None:
            self._downloads.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def discard(self) -> None:
        """The bootstrap is complete: delete the download folder."""
        self.close()
        remove_tree(self.directory)


def open_hub_files(config: BootstrapConfig, directory: str, manifest: dict | None) -> HubFileStream:
    """The native Hub stream of a new run (listing of the default branch now) or of a resumed one (the listing
    at the manifest's revision, which must list the same files for this node)."""
    from fwe_cli.loader.sources.hub_listing import resolve_listing

    resume = manifest["resume"] if manifest else None
    spec = config.source
    listing = resolve_listing(spec.dataset, spec.name, spec.split,
                              revision=manifest.get("revision") if manifest else None)
    stream = HubFileStream(listing, config.shard, directory, config.fields, config.bad_records == "error",
                           start=resume["position"] if resume else None,
                           bad=BadRecords(**resume["bad_records"]) if resume else None,
                           workers=config.workers, ahead=config.downloads,
                           remaining=config.target_bytes - (resume["bytes"] if resume else 0))
    started = [{key: v for key, v in f.items() if key != "first"} for f in (manifest or {}).get("hub_files") or []]
    if manifest is not None and started != stream.manifest_fields()["hub_files"]:
        raise OutputError(f"the Hub listing of {spec.dataset} at {listing.revision} no longer has the files this "
                          "bootstrap started with; pass --force to start over")
    largest = sorted((f.size for f in stream.files[stream.position()["file"]:]), reverse=True)
    preflight_disk(os.path.dirname(directory), stream.remaining + sum(largest[:config.downloads]), "the bootstrap",
                   "--gb")
    return stream.open()

"""Which of a bootstrap's Hub files are being fetched, how, and which row group is converted next: the window of the
file being converted and `ahead` more being fetched or waiting (bounding disk), each admitted only while the target
may still need it.

    window = FileWindow(repo, revision, files, fetcher, fields, ahead=2, connections=8, remaining=N, start=(k, g, r))
    task = window.take(block=True)            # (file, group, start row, its FileRead) once the group's bytes landed
    window.converted(k, g, start, nbytes)     # nbytes of JSONL came from it
    window.finish_below(k)                    # files before k are converted: checked and deleted
    window.close(record)                      # what was converted of unfinished files goes to record(k, read)

The footers of the admitted files come first; their sizes tell how much JSONL each row group gives (scaled by what
the conversion has given so far), so a file the target needs to its end is fetched whole, in as many pieces as the
connections the files after it leave, and the file where the target ends is fetched by row group (hub_file_reads).
"""

from __future__ import annotations

import os
from typing import Callable

from fwe_cli.bootstrap.hub_download import Fetcher, local_name
from fwe_cli.bootstrap.hub_file_reads import EARLY_WHOLE, FileRead
from fwe_cli.errors import SourceError
from fwe_cli.loader.hub.listing import HubFile
from fwe_cli.loader.remote.hub_env import resolve_url
from fwe_cli.output.os_errors import on_output

MISMATCH = ".sha256-mismatch"  # beside the downloads: a file whose bytes differed from the listing's sha256


class FileWindow:
    """The files of one stream being read, from `start` = (file, group, row) on."""

    def __init__(self, repo: str, revision: str, files: list[HubFile], fetcher: Fetcher, fields: str, ahead: int,
                 connections: int, remaining: int | None, start: tuple[int, int, int],
                 record: Callable[[int, FileRead], None]):
        self.repo, self.revision, self.files, self.fetcher, self.fields = repo, revision, files, fetcher, fields
        self.ahead, self.connections, self.remaining = max(1, ahead), connections, remaining
        self.start = start
        self.record = record
        """Called with (k, read) for a file not checked whole, once what was converted of it is final."""
        self.reads: dict[int, FileRead] = {}
        self.next = start  # the next (file, group, start row) to take
        self.low = start[0]  # the first file not finished
        self.produced = 0  # JSONL bytes converted ...
        self.estimated = 0.0  # ... where the footers' sizes expected this many

    # -- how much the target still needs ----------------------------------------------------------------
    def scale(self) -> float:
        """JSONL written per byte the footers expected, so far (1 before any)."""
        return self.produced / self.estimated if self.estimated else 1.0

    def room(self, k: int) -> float | None:
        """JSONL the target still needs from file k on, beyond what the files before it are expected to give;
        None without a target."""
        if self.remaining is None:
            return None
        earlier = [read for j, read in self.reads.items() if j < k and read.whole is not None]
        if any(not read.whole for read in earlier):
            return 0.0  # a file read by row group is where the target ends
        scale = self.scale()
        return self.remaining - self.produced - sum(read.estimate_left(scale) for read in earlier)

    # -- admitting and planning files -----------------------------------------------------------------
    def admit(self) -> None:
        """Let the next files in (their footers fetched, then planned) while the window and the target allow."""
        for k in range(self.low, min(self.low + 1 + self.ahead, len(self.files))):
            if k not in self.reads:
                room = self.room(k)
                if k > self.low and (room is not None and room <= 0 or self.reads[k - 1].whole is None):
                    return
                self._open(k)
            read = self.reads[k]
            if read.whole is None:
                room = self.room(k)
                if (room is None or room >= EARLY_WHOLE * read.file.size) and read.first_group() == 0:
                    self._plan(k, whole=True)  # surely needed to its end: no need to wait for its footer
                elif read.footer.done():
                    self._plan(k)
                else:
                    return

    def _open(self, k: int) -> None:
        file = self.files[k]
        begins = self.start[1:] if k == self.start[0] else (0, 0)
        self.reads[k] = FileRead(self.fetcher, resolve_url(self.repo, self.revision, file.path), file, self.fields,
                                 begins)

    def _plan(self, k: int, whole: bool | None = None) -> None:
        """Fetch file k whole if the target needs all of it (as far as its footer tells, unless `whole` says), else
        by row group; a whole file gets every connection the files after it in the window leave."""
        read = self.reads[k]
        if whole is None:
            read.resolve()
            room, scale = self.room(k), self.scale()
            needed = scale * sum(read.estimate(g) for g in range(read.first_group(), len(read.rows)))
            whole = room is None or needed <= room
        left = min(1 + self.ahead - (k - self.low), len(self.files) - k)
        read.plan(whole=whole, pieces=-(-self.connections // left))

    # -- taking row groups ---------------------------------------------------------------------------
    def take(self, block: bool) -> tuple[int, int, int, FileRead] | None:
        """The next (file, group, start row, its read) whose bytes have landed; None at the end, or (not `block`)
        when they have not."""
        k, g, start = self.next
        while k < len(self.files):
            self.admit()
            if k not in self.reads:  # the footers said the target ends before this file, but it does not
                if not block:
                    return None
                self._open(k)
            read = self.reads[k]
            if read.metadata is None:
                if not block and not read.footer.done():
                    return None
                if read.whole is None:
                    self._plan(k)
                read.resolve()
                continue
            if g >= len(read.rows):
                k, g, start = k + 1, 0, 0
                self.next = (k, g, start)
                continue
            if start >= read.rows[g]:
                g, start = g + 1, 0
                continue
            read.need(g, self.room(k), self.scale())
            if not block and not read.download.present(*read.span(g)):
                self.next = (k, g, start)
                return None
            read.download.wait(*read.span(g))
            self.next = (k, g + 1, 0)
            return k, g, start, read
        self.next = (k, g, start)
        return None

    def converted(self, k: int, group: int, start: int, jsonl_bytes: int) -> None:
        read = self.reads[k]
        read.converted.add(group)
        self.produced += jsonl_bytes
        self.estimated += read.estimate(group) * (read.rows[group] - start) / read.rows[group]

    # -- finishing files ---------------------------------------------------------------------------------
    def finish_below(self, limit: int) -> None:
        """Every group of the files before `limit` is converted: check each whole (or record what was read of it)
        and delete it."""
        for k in sorted(j for j in self.reads if j < limit):
            read = self.reads.pop(k)
            self.low = k + 1
            try:
                self._check(k, read)
            finally:
                self.fetcher.release(read.download)
        self.admit()

    def _check(self, k: int, read: FileRead) -> None:
        file = self.files[k]
        if read.whole and file.sha256 is not None:
            sha = read.download.sha256()
            if sha != file.sha256:
                note = os.path.join(self.fetcher.directory, local_name(file) + MISMATCH)
                with on_output("create", note), open(note, "w") as handle:
                    handle.write(sha)
                raise SourceError(f"{file.path}: sha256 {sha} of the download differs from the Hub listing's "
                                  f"{file.sha256}: the lines written from it cannot be trusted; re-run with --force")
        elif read.converted and not read.whole:
            self.record(k, read)

    def close(self) -> None:
        """Record what was converted of the files not finished, and delete their downloads."""
        for k, read in sorted(self.reads.items()):
            if read.download is not None:
                if read.converted:
                    self.record(k, read)
                self.fetcher.release(read.download)
        self.reads.clear()


def mismatched(directory: str) -> str | None:
    """The name of a file an earlier run of this download folder found differing from the listing's sha256."""
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return next((name[:-len(MISMATCH)] for name in names if name.endswith(MISMATCH)), None)

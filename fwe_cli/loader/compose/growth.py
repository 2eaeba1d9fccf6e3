"""A bootstrap of the Hub grown by the loader that continues it (`--tail hub --grow`): the rows the tail reads from
the Hub, where they continue the bootstrap without a gap, are appended to it as new parts, so the next job starts
local for longer. The bootstrap stays one `fwe bootstrap` would have written with a larger --gb: same lines, same
manifest (bootstrap_format), parts whole (PartWriter: written as `.partial`, fsynced, renamed) and each listed by
an atomic manifest replace that also moves `hub_next`/`next` and records where each new Hub file begins.

One writer at a time: the grower holds the bootstrap's lock (fwe_cli/output/lock.py) from the loader's open to its
close. Where the lock is held (another rank of the job, a running `fwe bootstrap`), this loader reads without
growing and says so in one note. A kill -9 leaves at most one `.partial` part that the manifest does not list:
`fwe bootstrap --verify` accepts the directory, and the next grower (or `fwe bootstrap --gb` extending it) starts
that part again. A failure to write (disk full) stops the growth with a warning; reading goes on.

Rows are written only while they are the bootstrap's continuation: the cursor starts at `hub_next` (file of the
listing, row group, rows of it before) and moves with each row written. A row elsewhere (a shuffled file order
reaching a later file first, a second epoch) is read but not written, and growth resumes if the stream reaches the
cursor again.
"""

from __future__ import annotations

import threading
import warnings

from fwe_cli.artifacts import utc_iso
from fwe_cli.errors import ConfigError, FweError, FweNotice, OutputError
from fwe_cli.loader.files.bootstrap_format import Layout, listed_totals
from fwe_cli.loader.files.bootstrap_lines import encoder
from fwe_cli.output.lock import OutputLock
from fwe_cli.output.manifest_file import load_manifest, write_manifest
from fwe_cli.output.part_writer import PartWriter


def growth_refusal(manifest: dict, path: str) -> str | None:
    """Why a bootstrap cannot be grown from its Hub tail (None when it can)."""
    if manifest.get("layout") == "single-file":
        return f"{path} is a single-file bootstrap (one part): make a directory bootstrap to grow it"
    if manifest.get("fields") != "text":
        return (f"{path} holds --fields {manifest.get('fields')}; the loader reads only text and id from the Hub, so "
                "it can grow only a --fields text bootstrap")
    shard = manifest.get("shard") or {}
    if shard.get("mod", 1) != 1:
        return (f"{path} holds node {shard.get('rem')}/{shard.get('mod')}'s files of the listing; growing it from "
                "the Hub stream would leave gaps: grow a bootstrap of the whole listing")
    return None


class Growth:
    """Appends the Hub rows a HeadTail reads to the bootstrap it continues (see the module docstring)."""

    def __init__(self, path: str):
        self.layout = Layout.for_out(path)
        self.manifest: dict | None = None
        self.documents = 0
        """Documents appended by this loader (listed or in the part being written)."""
        self.parts = 0
        """Parts this loader finished and listed."""
        self.stopped: str | None = None
        """Why growth stopped (None while it goes on)."""
        self._lock: OutputLock | None = None
        self._writer: PartWriter | None = None
        self._cursor: tuple[int, int, int] | None = None
        self._firsts: dict[int, dict] = {}  # files begun in the part being written: their `first`, listed with it
        self._bad = 0
        self._encode = encoder("text")
        self._mutex = threading.Lock()  # rows come on the producer's thread; close() may come from any thread

    def start(self) -> dict | None:
        """Take the bootstrap's lock and read its manifest under it: that manifest (the reader plans from it), or
        None when another run holds the lock (a note says this loader reads without growing)."""
        lock = OutputLock(self.layout)
        try:
            lock.__enter__()
        except OutputError as exc:
            self.stopped = "the bootstrap is being written by another run"
            warnings.warn(f"fwe: not growing {self.layout.out}: {exc}", FweNotice, stacklevel=2)
            return None
        self._lock = lock
        try:
            manifest = load_manifest(self.layout)
            refusal = growth_refusal(manifest, self.layout.out) if manifest is not None else None
        except BaseException:
            self._close()
            raise
        if refusal is not None:
            self._close()
            raise ConfigError(f"--grow: {refusal}")
        self.manifest = manifest
        stop = manifest.get("hub_next") if manifest else None
        self._cursor = (stop["file"], stop["group"], stop["row"]) if stop else None
        if self._cursor is None:
            self.stopped = "the bootstrap holds the whole listing"
        return manifest

    @property
    def active(self) -> bool:
        return self._cursor is not None and self.stopped is None

    def row(self, file: int, group: int, row: int, values: dict, group_rows: int, last_group: bool) -> None:
        """Row `row` (1-based) of row group `group` of listing file `file`, read from the Hub: appended when it is
        the one the bootstrap continues with. `group_rows`: rows in its group; `last_group`: the file's last."""
        if not self.active or (file, group, row - 1) != self._cursor:
            return
        with self._mutex:
            if self.active:
                self._row(file, group, row, values, group_rows, last_group)

    def _row(self, file: int, group: int, row: int, values: dict, group_rows: int, last_group: bool) -> None:
        begins_file = self._cursor[1:] == (0, 0)
        if row < group_rows:
            self._cursor = (file, group, row)
        elif not last_group:
            self._cursor = (file, group + 1, 0)
        else:
            self._cursor = (file + 1, 0, 0)
        # the cursor is past this row before the row is added: a part finished by it lists where the next one is
        try:
            self._append(file, values, begins_file)
            if self._cursor[0] == len(self.manifest["hub_listing"]):  # the listing's end: nothing left to grow into
                self._finish_part()
                self._stop(None)
        except FweError as exc:
            self._stop(f"writing failed ({exc}); reading goes on without growing it")

    def _append(self, file: int, values: dict, begins_file: bool) -> None:
        manifest = self.manifest
        if self._writer is None:
            index = len(manifest["files"])
            self._writer = PartWriter(self.layout.partial_path(index), self.layout.part_path(index))
        writer = self._writer
        if begins_file and "first" not in manifest["hub_files"][file]:
            self._firsts[file] = {"part": len(manifest["files"]), "offset": writer.size, "line": writer.lines}
        if not isinstance(values.get("text"), str):  # a bad record, skipped like `fwe bootstrap` skips it
            self._bad += 1
            return
        writer.add(self._encode(values, None))
        self.documents += 1
        if writer.size >= manifest["file_bytes"]:
            self._finish_part()

    def _finish_part(self) -> None:
        """Finish the part being written and list it, with the new stop position, in one manifest replace."""
        writer, manifest = self._writer, self.manifest
        if writer is None:
            return
        self._writer = None
        if writer.lines == 0:
            writer.close()
            return
        entry = writer.finish()
        manifest["files"].append(entry)
        for file, first in self._firsts.items():
            manifest["hub_files"][file]["first"] = first
        self._firsts.clear()
        file, group, row = self._cursor
        totals = listed_totals(manifest)
        ended = file >= len(manifest["hub_listing"])
        index = totals["documents"]
        manifest["hub_next"] = None if ended else {"file": file, "group": group, "row": row, "index": index}
        manifest["next"] = None if ended else {"index": index, "file": file, "group": group, "row": row}
        manifest["source_exhausted"] = ended
        manifest["totals"] = totals
        bad = manifest.setdefault("bad_records", {"count": 0, "examples": []})
        bad["count"] = bad.get("count", 0) + self._bad
        self._bad = 0
        runs = manifest.setdefault("runs", [])
        if not self.parts:
            runs.append({"started": utc_iso(), "outcome": "grown by the loader (--tail hub --grow)",
                         "grown_documents": 0, "grown_parts": 0})
        self.parts += 1
        runs[-1].update(finished=utc_iso(), grown_documents=runs[-1]["grown_documents"] + entry["lines"],
                        grown_parts=self.parts)
        write_manifest(self.layout, manifest)

    def _stop(self, why: str | None) -> None:
        if why is not None:
            warnings.warn(f"fwe: growing {self.layout.out}: {why}", RuntimeWarning, stacklevel=3)
        self.stopped = why or "the bootstrap now holds the whole listing"

    def close(self) -> None:
        """List the part being written (what was read is kept), then let go of the lock. From any thread, more than
        once."""
        with self._mutex:
            self._close()

    def _close(self) -> None:
        try:
            if self._writer is not None and self.stopped is None:
                try:
                    self._finish_part()
                except FweError as exc:
                    self._stop(f"writing failed ({exc})")
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            if self._lock is not None:
                self._lock.__exit__(None, None, None)
                self._lock = None
            if self.stopped is None:
                self.stopped = "the loader closed"

    def describe(self) -> dict:
        return {"documents": self.documents, "parts": self.parts, "stopped": self.stopped}

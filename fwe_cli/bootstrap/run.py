"""Stage N GB of FineWeb-Edu as local JSONL parts plus a manifest, resumable after any interruption.

    from fwe_cli.bootstrap.config import BootstrapConfig
    from fwe_cli.bootstrap.run import run_bootstrap
    result = run_bootstrap(BootstrapConfig(out="/data/fwe_bootstrap", target_bytes=5 * 10**9))

What makes it safe (fwe_cli/loader/files/bootstrap_format.py has the file layout, fwe_cli/output/ what resumable outputs share):
- parts are written as `*.partial`, fsynced and renamed only when whole; the manifest is replaced atomically;
- every `checkpoint_bytes`, and on a clean stop, the current part is fsynced and the manifest records the
  source position after the last record written (`resume`);
- one run at a time per output: a run holds the output's lock (fwe_cli/output/lock.py) throughout, and a second
  one is refused at once naming the first one's PID;
- a re-run with the same arguments continues from there: records already on disk after the checkpoint are
  compared with the regenerated ones and kept when intact (see PartWriter), so the output ends up
  byte-identical to an uninterrupted run; different arguments are refused unless `force`.

Output bytes count the JSONL written (1 GB = 10**9 bytes). Writing stops after the record that reaches the
target, or when the source ends. A part is closed once it holds `file_bytes`, after the record that reaches it.
"""

from __future__ import annotations

import os
from typing import Callable

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.bootstrap.config import GB, MB, BootstrapConfig
from fwe_cli.bootstrap.state import check_out_kind, check_source_files, fresh_manifest, open_source, prepare_output
from fwe_cli.errors import DiskSpaceError, OutputError, SourceError, os_error_line
from fwe_cli.loader.compose.holdout import HoldoutRecords
from fwe_cli.loader.files.bootstrap_format import Layout, listed_totals
from fwe_cli.loader.files.bootstrap_lines import encoder
from fwe_cli.loader.remote.hub_env import hub_requests, requests_sent
from fwe_cli.loader.sources.records import Records
from fwe_cli.output.disk_preflight import preflight_disk
from fwe_cli.output.faults import Faults
from fwe_cli.output.lock import OutputLock
from fwe_cli.output.manifest_file import encode_manifest, write_manifest
from fwe_cli.output.part_writer import PartWriter, recover_renamed_part
from fwe_cli.output.progress_clock import ProgressClock


class _Run:
    """State of one invocation; `run()` returns the result dict."""

    def __init__(self, config: BootstrapConfig, on_progress, should_stop, faults: Faults, background: bool):
        self.config = config
        self.layout = Layout.for_out(config.out)
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.faults = faults
        self.background = background
        self.file_bytes = float("inf") if self.layout.single else config.file_bytes
        self.part = 0  # index of the part being written
        self.writer: PartWriter | None = None  # its writer, None between parts
        self.replayed = 0  # records found intact on disk after the last checkpoint (resume)
        self.discarded = 0  # bytes cut off after them (a torn record)
        self.requests_from = requests_sent()  # the Hub requests of this run: counted by kind in its result

    def checkpoint(self, writer: PartWriter | None, part: int, stream: Records, wait: bool = True) -> None:
        """Record the resume point after the last record added (the part's bytes fsynced first).

        wait=False lets the writer thread do the fsync and manifest write while records keep coming."""
        self.manifest["resume"] = {
            "part": part, "part_bytes": writer.size if writer else 0, "part_lines": writer.lines if writer else 0,
            "bytes": self.total_bytes, "documents": self.documents,
            "position": stream.position(), "bad_records": stream.bad.to_dict(),
        }
        self.manifest["bad_records"] = stream.bad.to_dict()
        self.manifest["totals"] = listed_totals(self.manifest)
        if writer is None:
            self._write_manifest()
        elif wait:
            writer.sync()
            self._write_manifest()
        else:
            snapshot = encode_manifest(self.manifest)
            writer.checkpoint(lambda: self._write_manifest(snapshot))

    def _write_manifest(self, snapshot: bytes | None = None) -> None:
        write_manifest(self.layout, self.manifest if snapshot is None else snapshot,
                       before_rename=lambda: self.faults.reached("manifest-tmp"))

    def open_part(self, part: int, valid_bytes: int = 0, valid_lines: int = 0, resume: bool = False) -> PartWriter:
        """A writer for `part` (the output's directory exists: the lock, OutputLock, made it)."""
        return PartWriter(self.layout.partial_path(part), self.layout.part_path(part), valid_bytes, valid_lines,
                          resume=resume, faults=self.faults, background=self.background)

    def _tally(self, writer: PartWriter) -> None:
        """Add a part writer's resume statistics to this run's."""
        self.replayed += writer.replayed_lines
        self.discarded += writer.discarded_bytes

    def finish_part(self, stream: Records) -> None:
        """Complete the current part (fsync, rename), list it, and checkpoint at the start of the next one."""
        writer = self.writer
        self._tally(writer)
        entry = writer.finish(before_rename=lambda: self.faults.reached("part-fsynced"),
                              after_rename=lambda: self.faults.reached("part-renamed"))
        self.writer = None  # only now: a writer whose finish() failed is still closed by copy()
        self.manifest["files"].append(entry)
        self.part += 1
        self.checkpoint(None, self.part, stream)

    def progress(self, force: bool = False) -> None:
        elapsed = self.clock.due(force)
        if elapsed is None:
            return
        done = self.total_bytes - self.start_bytes
        rate = done / elapsed if elapsed > 0 else 0.0
        left = max(0, self.config.target_bytes - self.total_bytes)
        self.on_progress({"bytes": self.total_bytes, "target_bytes": self.config.target_bytes,
                          "documents": self.documents, "files": len(self.manifest["files"]),
                          "elapsed_s": round(elapsed, 3), "mb_per_s": round(rate / MB, 2),
                          "eta_s": round(left / rate, 1) if rate > 0 else None})

    def run(self) -> dict:
        config, layout = self.config, self.layout
        check_out_kind(layout)
        with OutputLock(layout):  # held until the run returns: prepare_output may delete files
            return self._run_locked(config, layout)

    def _run_locked(self, config: BootstrapConfig, layout: Layout) -> dict:
        self.clock = ProgressClock()
        manifest = prepare_output(config, layout)
        if manifest is not None and manifest["complete"]:
            self.manifest, self.total_bytes, self.documents = manifest, manifest["totals"]["bytes"], \
                manifest["totals"]["documents"]
            self.start_bytes = self.total_bytes
            return self.result("already_complete")
        resume = manifest["resume"] if manifest else None
        done = resume["bytes"] if resume else 0
        preflight_disk(layout.directory, config.target_bytes - done, "the bootstrap", "--gb")
        try:
            stream = open_source(config, layout, manifest)
            if manifest is None:
                manifest = fresh_manifest(config, layout, stream)
            else:
                check_source_files(manifest, stream)
        except OSError as exc:  # writes to the output raise OutputError (output/os_errors.py): the source's
            raise self._source_failure(exc) from None
        self.manifest = manifest
        manifest["runs"].append({"started": utc_iso(), "resumed_from_bytes": done})
        if stream.revision_pinned is not None:
            manifest["runs"][-1]["revision_pinned"] = stream.revision_pinned
        self.total_bytes = self.start_bytes = done
        self.documents = resume["documents"] if resume else 0
        self.part = resume["part"] if resume else 0
        if resume is None:
            self.checkpoint(None, 0, stream)
        return self.copy(stream, resume)

    def copy(self, stream: Records, resume: dict | None) -> dict:
        """Write records from `stream` into parts, from the resume point if any; returns the result dict."""
        self.writer = self._reopen_part(resume) if resume else None
        if hasattr(stream, "on_file"):  # the Hub, file by file: where each file's lines start (for --tail hub)
            stream.on_file = self._file_starts
        self.progress(force=True)
        try:
            outcome = self._copy_records(stream)
        except DiskSpaceError as exc:
            raise DiskSpaceError(f"disk full while writing {self.layout.directory} at {self.total_bytes / GB:.3f} of "
                                 f"{self.config.target_bytes / GB:.3f} GB: {exc}") from exc
        except OSError as exc:  # every write to the output raises OutputError (output/os_errors.py): the source's
            raise self._source_failure(exc) from None
        finally:
            if self.writer is not None:
                self._tally(self.writer)
                self.writer.close()
            getattr(stream, "close", lambda: None)()  # the native Hub reader's downloads and workers
        self._record_outcome(outcome, stream)
        if outcome != "interrupted":
            getattr(stream, "discard", lambda: None)()
        self.progress(force=True)
        return self.result(outcome)

    def _reopen_part(self, resume: dict) -> PartWriter | None:
        """The part the last checkpoint was in, reopened to replay what is on disk after it; None if not begun."""
        partial, final = self.layout.partial_path(self.part), self.layout.part_path(self.part)
        if not (resume["part_bytes"] or os.path.exists(partial) or os.path.exists(final)):
            return None
        recover_renamed_part(partial, final)
        if os.path.exists(partial):
            return self.open_part(self.part, resume["part_bytes"], resume["part_lines"], resume=True)
        if resume["part_bytes"]:
            raise OutputError(f"{partial} is missing but the last checkpoint saved {resume['part_bytes']} bytes "
                              "of it; pass --force to start over")
        return None

    def _copy_records(self, stream: Records) -> str:
        """Add records until the target is reached, the source ends or a stop is asked for; returns the outcome.

        The per-record loop of the whole bootstrap: what it reads often is kept in locals."""
        encode_fn = (lambda record, line: line) if getattr(stream, "encoded", False) else encoder(self.config.fields)
        target, file_bytes = self.config.target_bytes, self.file_bytes
        every = self.config.checkpoint_bytes
        next_checkpoint = self.total_bytes + every
        writer = self.writer
        for count, (record, raw) in enumerate(stream, start=1):
            line = encode_fn(record, raw)
            if writer is None:
                writer = self.writer = self.open_part(self.part)
            writer.add(line)
            self.total_bytes += len(line)
            self.documents += 1
            if self.faults.active:
                self.faults.reached("record")
            if writer.size >= file_bytes or self.total_bytes >= target:
                self.finish_part(stream)
                writer = None
                next_checkpoint = self.total_bytes + every
                if self.total_bytes >= target:
                    return "target reached"
            elif self.total_bytes >= next_checkpoint and not writer.replaying:
                self.checkpoint(writer, self.part, stream, wait=False)
                next_checkpoint = self.total_bytes + every
            if count & 63 == 0:
                if self.should_stop():
                    self.checkpoint(writer, self.part, stream)
                    return "interrupted"
                self.progress()
        if writer is not None:
            self.finish_part(stream)
        return "source exhausted"

    def _source_failure(self, exc: OSError) -> SourceError:
        """An OSError from opening or reading the source (unreadable or corrupt file, dropped connection): exit 4,
        naming the file when the OS did, else the source. Raised `from None`: the line holds the OSError's words."""
        config = self.config
        where = exc.filename or config.source.location()
        return SourceError(os_error_line("read source", str(where), exc))

    def _file_starts(self, k: int) -> None:
        """This node's file `k` of the Hub listing starts with the next line: record where (part, byte, line)."""
        writer = self.writer
        self.manifest["hub_files"][k]["first"] = {"part": self.part, "offset": writer.size if writer else 0,
                                                  "line": writer.lines if writer else 0}

    def _record_outcome(self, outcome: str, stream: Records) -> None:
        """Mark the manifest complete (unless interrupted), close this run's entry and write it."""
        if outcome != "interrupted":
            if self.documents == 0:
                raise SourceError(f"the source produced no documents ({stream.bad.count} bad records); "
                                  "nothing was staged")
            reached = outcome == "target reached"
            self.manifest.update(complete=True, finished=utc_iso(), resume=None, bad_records=stream.bad.to_dict(),
                                 source_exhausted=not reached,
                                 # where the next document is: `fwe bootstrap` with a larger --gb continues there,
                                 # and for the Hub (`hub_next`: listing file, row group, row) the loader's --tail hub
                                 next=stream.position() if reached else None)
            if hasattr(stream, "next_document"):
                self.manifest["hub_next"] = stream.next_document() if reached else None
            self.manifest["totals"] = listed_totals(self.manifest)
        self.manifest["runs"][-1].update(finished=utc_iso(), outcome=outcome, replayed_records=self.replayed,
                                         discarded_bytes=self.discarded)
        if isinstance(stream, HoldoutRecords):  # what this run's reading kept and passed over, every shard's
            self.manifest["runs"][-1]["holdout"] = {"documents_kept": stream.split.kept,
                                                    "documents_removed": stream.split.removed}
        self._write_manifest()

    def result(self, outcome: str) -> dict:
        seconds = self.clock.elapsed()
        written = self.total_bytes - self.start_bytes
        manifest = self.manifest
        return {
            "ok": bool(manifest["complete"]),
            "complete": bool(manifest["complete"]),
            "outcome": outcome,
            "output": self.layout.out,
            "manifest_path": self.layout.manifest_path,
            "bytes": self.total_bytes,
            "documents": self.documents,
            "files": len(manifest["files"]),
            "target_bytes": self.config.target_bytes,
            "bytes_this_run": written,
            "seconds": round(seconds, 3),
            "mb_per_s": round(written / MB / seconds, 2) if seconds > 0 else 0.0,
            "resumed_from_bytes": self.start_bytes,
            "replayed_records": self.replayed,
            "discarded_bytes": self.discarded,
            "bad_records": manifest.get("bad_records"),
            "source_exhausted": manifest.get("source_exhausted"),
            "holdout": manifest.get("holdout") and dict(manifest["holdout"], **manifest["runs"][-1].get("holdout", {})),
            "hub_requests": hub_requests(since=self.requests_from),
            "fwe_version": fwe_cli.__version__,
            "manifest": manifest,
        }


def run_bootstrap(config: BootstrapConfig, on_progress: Callable[[dict], None] = lambda info: None,
                  should_stop: Callable[[], bool] = lambda: False, background: bool = True,
                  faults: Faults | None = None) -> dict:
    """Create, resume or confirm the bootstrap `config` describes; returns a result dict (see `_Run.result`).

    `on_progress` gets {bytes, target_bytes, documents, files, elapsed_s, mb_per_s, eta_s} about twice a second;
    `should_stop` is polled every 64 records: when true, a resume point is saved and the result says
    outcome 'interrupted'. Raises DiskSpaceError (resumable), OutputError, SourceError or ConfigError.
    """
    return _Run(config, on_progress, should_stop, faults or Faults.from_env(), background).run()

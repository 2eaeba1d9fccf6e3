"""Text files: plain files (JSONL/TXT/parquet, a directory or a glob of them) and a bootstrap (`fwe bootstrap`'s
parts and manifest), on this machine or in an object store (an s3://, gs://, az://, hf:// URL). Both are listed by
files.listing.resolve_files (a URL by files.objects.resolve_objects, which remembers each object's size and version)
and read by the same readers (files.formats, files.read); a bootstrap is recognised by its manifest, its parts are
checked against it (size always, sha256 with --verify-parts), and its artifacts say it is one. A token directory is
files.token_dir.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator

from fwe_cli.errors import ConfigError, SettingError, SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.files.formats import (
    JSONL_SUFFIXES,
    FilePosition,
    check_fields,
    file_size,
    open_parquet,
    passing_lines,
    scan_jsonl,
    scan_parquet,
    scan_txt,
)
from fwe_cli.loader.files.listing import bootstrap_manifest_path, read_manifest, resolve_files
from fwe_cli.loader.files.read import read_local
from fwe_cli.loader.flow.in_background import import_in_background
from fwe_cli.loader.remote.object_store import PACKAGES, is_url, scheme
from fwe_cli.loader.sources.base import Source
from fwe_cli.loader.sources.records import Records
from fwe_cli.loader.sources.units import Piece, RowGroups, Unit
from fwe_cli.loader.sources.where import check_where, filter_of


@dataclass(frozen=True)
class LocalOptions:
    local_path: str | None = None
    """A JSONL/TXT/parquet file, a directory or glob of them, a bootstrap or a token directory; or an object store's
    URL (s3://, gs://, az://, hf://) naming an object, a prefix, a glob or a bootstrap."""
    where: str | None = None
    """A row filter on the records' fields (sources.where): only passing records are documents (not for TXT files
    or a token directory, which have no fields)."""

    def __post_init__(self) -> None:
        check_where(self.where)
        if not isinstance(self.local_path, str) or not self.local_path:
            raise SettingError(lambda n: f"source 'local' needs {n('local_path')} (a file, directory, glob, bootstrap "
                                         f"or token directory), got {self.local_path!r}")
        if self.where is not None and self.local_path.endswith(".txt"):  # (TXT found in a folder: when it opens)
            raise SettingError(lambda n: f"{n('where')} filters records by their fields; {n('local_path')} "
                                         f"{self.local_path} is TXT (one document per line, no fields)")


class LocalPath(Source):
    """What every reader of a --local-path shares: the option, listing once, and the files' fingerprint."""

    Options = LocalOptions

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self.where, self.filtered = filter_of(spec.options)
        self._fingerprint: list[dict] | None = None
        self._units: list[Unit] | None = None
        self.objects: list | None = None
        """An object store's objects as listed (files.objects.ObjectInfo: size, version), None for local files."""

    @classmethod
    def location(cls, spec) -> str:
        return str(spec.options.local_path)

    def prepare(self) -> None:
        """For an object store: its filesystem's package (s3fs, ...) and, unless the path names text, pyarrow's
        parquet reader imported on threads of their own, beside the tokenizer's load rather than after it."""
        super().prepare()
        path = self.spec.options.local_path
        if is_url(path):
            package = PACKAGES.get(scheme(path), (None, None))[0]
            text = path.endswith((".jsonl", ".json", ".txt", ".gz"))
            for module in (package, None if text else "pyarrow.parquet"):
                if module is not None:
                    import_in_background(module)

    def open(self, set_stage: Callable[[str], None]) -> None:
        if self.files:
            return
        hashing = ", hashing bootstrap parts" if self.options.verify_parts else ""
        set_stage(f"opening source (listing local files{hashing})")
        files = self.list_files()
        if self.where is not None:
            text = next((path for path in files if path.endswith(".txt")), None)
            if text is not None:
                raise ConfigError(f"--where filters records by their fields; {text} is TXT (one document per line, no "
                                  "fields): give JSONL or parquet, or drop --where")
            if files:
                check_fields(files[0], self.where)
        self.files = files

    def list_files(self) -> list[str]:
        path, options = self.spec.options.local_path, self.options
        if is_url(path):
            from fwe_cli.loader.files.objects import resolve_objects

            self.objects = resolve_objects(path, options.storage_options, options.allow_partial, options.verify_parts)
            return [obj.url for obj in self.objects]
        return resolve_files(path, allow_partial=options.allow_partial, verify_parts=options.verify_parts)

    def fingerprint(self) -> list[dict]:
        """Each file's absolute path, size and modification time as the source opened (one stat each, once), or an
        object's URL, size and version as listed: a file rewritten (an object replaced) since changes one of them."""
        if self.objects is not None:
            from fwe_cli.loader.files.objects import fingerprint

            return fingerprint(self.objects)
        if self._fingerprint is None or len(self._fingerprint) != len(self.files):
            out = []
            for path in self.files:
                info = os.stat(path)
                out.append({"path": os.path.abspath(path), "bytes": info.st_size, "mtime_ns": info.st_mtime_ns})
            self._fingerprint = out
        return self._fingerprint

    def local_files(self) -> list[str]:
        self.open(lambda stage: None)
        return [] if is_url(self.spec.options.local_path) else list(self.files)

    def describe(self) -> dict:
        info = {"kind": self.spec.kind, "path": self.spec.options.local_path, "files": len(self.files),
                "bad_records": self.bad.to_dict(), **(self.filtered.describe() if self.filtered is not None else {})}
        if is_url(self.spec.options.local_path):  # the requests made and retried in this process
            from fwe_cli.loader.remote.object_store import store_for

            info["object_store"] = store_for(self.spec.options.local_path, self.options.storage_options).describe()
        return info


class LocalFiles(LocalPath):
    """JSONL, TXT and parquet files: every document of each file, files in path order; a unit each (a gzip file read
    whole by one reader), or with a row filter each parquet row group its statistics do not rule out."""

    position_type = FilePosition

    def units(self) -> list[Unit]:
        if self._units is None:
            self._units = [unit for number, path in enumerate(self.files) for unit in self._file_units(number, path)]
        return self._units

    def _file_units(self, number: int, path: str) -> list[Unit]:
        size = file_size(path)
        if self.where is None or not path.endswith(".parquet"):
            return [Unit(number, 0, size, whole=path.endswith(".gz"))]
        parquet = open_parquet(path)
        groups = RowGroups.of(parquet.metadata, size)
        units = []
        for group, count in enumerate(groups.counts):
            if self.where.may_match(parquet.metadata.row_group(group)):
                units.append(Unit(number, *groups.extent(group)))
            else:  # ruled out before it is dealt: no reader reads it, and the readers share the rest evenly
                self.filtered.skip_row_group(count)
        return units

    def read(self, pieces: list[Piece], at: FilePosition | None) -> Iterator[tuple[Document, FilePosition, int]]:
        return read_local(self.files, pieces, at, self.bad, self.options.strict, self.filtered)

    def records(self, shard, start=None, all_fields=False, bad=None) -> Records:
        return LocalRecords(self, shard, start, all_fields, bad)


class BootstrapDir(LocalFiles):
    """`fwe bootstrap`'s output: a directory of parts with manifest.json, or X.jsonl with X.jsonl.manifest.json."""

    @classmethod
    def reader_for(cls, spec, options) -> "BootstrapDir | None":
        path = spec.options.local_path
        if is_url(path):
            from fwe_cli.loader.files.objects import bootstrap_manifest_url

            return cls(spec, options) if bootstrap_manifest_url(path, options.storage_options) is not None else None
        return cls(spec, options) if bootstrap_manifest_path(path) is not None else None

    def manifest(self) -> tuple[str, object] | None:
        """(where the bootstrap's manifest is, its JSON), on this disk or in an object store; None when there is
        none. SourceError naming a manifest that cannot be read."""
        path = self.spec.options.local_path
        if not is_url(path):
            found = bootstrap_manifest_path(path)
            return None if found is None else (found, read_manifest(found))
        from fwe_cli.loader.files.objects import bootstrap_manifest_url, read_manifest_object

        found = bootstrap_manifest_url(path, self.options.storage_options)
        return None if found is None else (found, read_manifest_object(found, self.options.storage_options))

    def describe(self) -> dict:
        return dict(super().describe(), bootstrap=True)


class LocalRecords(Records):
    """Records of local files; position {"index", "file", "offset", "line"} (offset: bytes, or rows for parquet)."""

    def __init__(self, source: LocalPath, shard, start=None, all_fields=False, bad=None):
        super().__init__(source, shard, start, all_fields, bad)
        self.file = int(self.start.get("file", 0))
        self.offset = int(self.start.get("offset", 0))
        self.line = int(self.start.get("line", 0))

    def _open(self) -> None:
        super()._open()
        if self.file > len(self.files):
            where = self.source.location(self.source.spec)
            raise SourceError(f"saved position names file #{self.file} but {where} has {len(self.files)} files")

    def position(self) -> dict:
        return {"index": self.index, "file": self.file, "offset": self.offset, "line": self.line}

    def _records(self) -> Iterator[tuple[dict, bytes | None]]:
        shard = self.shard
        index = self.index
        for file_no in range(self.file, len(self.files)):
            start, line = (self.offset, self.line) if file_no == self.file else (0, 0)
            for record, _text, lineno, end, raw, _begin in self._scan(self.files[file_no], start, line):
                owned = shard.owns(index)
                index += 1
                if owned:
                    self.file, self.offset, self.line, self.index = file_no, end, lineno, index
                    yield record, raw

    def _scan(self, path: str, start: int, line: int) -> Iterator[tuple[dict, str, int, int, bytes | None, int]]:
        """scan_jsonl's (record, text, line or row number, end position, raw JSONL line or None, where it began) for
        any format, of the records that pass the source's filter.

        For JSONL, the hot path, it is scan_jsonl itself, with no adapter generator in between (but the filter's)."""
        if path.endswith(JSONL_SUFFIXES):
            records = scan_jsonl(path, self.bad, self.strict, start, line)
            filtered = self.source.filtered
            return records if filtered is None else passing_lines(records, path, filtered)
        if path.endswith(".txt"):
            return (({"text": text}, text, lineno, end, None, begin)
                    for text, lineno, end, begin in scan_txt(path, start, line))
        rows = scan_parquet(path, self.bad, self.strict, self.all_fields, start_row=start,
                            filtered=self.source.filtered)
        return ((record, record["text"], row, row, None, row) for record, row in rows)

"""An output's manifest on disk: replaced atomically and durably at every checkpoint, read back for a resume.

The manifest is the record of truth of a resumable output: what it lists is whole, and what a re-run resumes from.
`write_manifest` writes it to `MANIFEST.tmp`, fsyncs it, renames it over the manifest and fsyncs the directory, so
a crash at any moment leaves either the old manifest or the new one; `load_manifest` reads it back, and whatever it
cannot trust (unreadable, not JSON, another format, a damaged shape) is an OutputError naming the file.
"""

from __future__ import annotations

import os
from typing import Callable

import orjson

from fwe_cli.errors import OutputError, os_error_line
from fwe_cli.output.kind import OutputLayout
from fwe_cli.output.os_errors import on_output


def fsync_dir(directory: str) -> None:
    """Make a rename or new file in `directory` durable (POSIX: the directory entry needs its own fsync)."""
    with on_output("sync directory", directory):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def encode_manifest(manifest: dict) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def write_manifest(layout: OutputLayout, manifest: dict | bytes,
                   before_rename: Callable[[], None] = lambda: None) -> None:
    """Replace the manifest (a dict, or encode_manifest's bytes) atomically and durably.

    `before_rename` is a crash-test hook. One writer at a time: the run holds the output's lock (lock.py), so the
    fixed temporary name cannot be written by two processes at once."""
    with on_output("create directory", layout.directory):
        os.makedirs(layout.directory, exist_ok=True)
    tmp = layout.manifest_path + ".tmp"
    data = manifest if isinstance(manifest, bytes) else encode_manifest(manifest)
    with on_output("write", tmp):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    before_rename()
    with on_output("replace", layout.manifest_path):
        os.replace(tmp, layout.manifest_path)
    fsync_dir(layout.directory)


def load_manifest(layout: OutputLayout) -> dict | None:
    """The manifest, None when there is none; OutputError when it cannot be read, is not JSON, is not of the
    layout's kind (its `format`), or its kind finds its shape damaged."""
    path, kind = layout.manifest_path, layout.kind
    try:
        with open(path, "rb") as handle:
            manifest = orjson.loads(handle.read())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as exc:  # chained: the one-line error then says where in the file it breaks
        raise OutputError(f"{path} is damaged (not JSON: {exc.msg}); pass --force to start over") from exc
    except OSError as exc:
        raise OutputError(os_error_line("read", path, exc)) from None  # the line says all the OSError says
    if not isinstance(manifest, dict) or manifest.get("format") != kind.format:
        raise OutputError(f"{path} is not an fwe {kind.what} manifest (format {kind.format}); choose another --out, "
                          "or pass --force to replace it")
    problem = kind.shape_problem(manifest)
    if problem is not None:
        raise OutputError(f"{path} is damaged ({problem}); pass --force to start over")
    return manifest

"""Which files a local path names, each checked before anything opens it.

A path may be a file, a directory (all supported files below it, sorted by path), a glob (`**` for any depth), or a
bootstrap (a directory with `manifest.json`, or a single file `X.jsonl` with `X.jsonl.manifest.json` beside it).

What `resolve_files` guarantees about the list it returns:
- each file once: two paths to one file (a symlink, a second route through a linked directory) give one entry;
- a finite walk: directories (a directory symlink included) are entered once each by their real path, so a symlink
  loop (`d/loop -> d`) neither repeats documents nor recurses until the OS gives up;
- regular files only: a FIFO, device, socket or directory where a file is expected is an InputError naming it;
  opening a FIFO for reading blocks until something writes to it, so this must be known before the open;
- a bootstrap's parts are the sizes its manifest records (os.stat, always), and with `verify_parts` the sha256.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import stat
from pathlib import Path
from typing import Iterator

import orjson

from fwe_cli.errors import InputError, SourceError, os_error_line
from fwe_cli.output.verify import listed_file_problems

JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
SUPPORTED_SUFFIXES = JSONL_SUFFIXES + (".txt", ".parquet")
MANIFEST_NAME = "manifest.json"
SIDECAR_MANIFEST_SUFFIX = ".manifest.json"  # single-file bootstrap: X.jsonl + X.jsonl.manifest.json

_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def supported(path: str) -> bool:
    return path.endswith(SUPPORTED_SUFFIXES) and not path.endswith(SIDECAR_MANIFEST_SUFFIX)


def read_manifest(path: str | os.PathLike, what: str = "bootstrap manifest") -> dict:
    """A bootstrap manifest's JSON (or, `what` says, another manifest's), parsed; `path` is the manifest file itself
    or a bootstrap directory.

    The manifest's file name: `manifest.json` inside a bootstrap directory (MANIFEST_NAME), or `X.jsonl.manifest.json`
    beside a single-file bootstrap `X.jsonl` (SIDECAR_MANIFEST_SUFFIX); a path ending in `manifest.json` is read as
    the file, anything else as the directory. Raises SourceError naming the file when it cannot be read (a missing
    one included) or is not JSON, with the OSError or JSONDecodeError as its cause. The caller checks that the JSON
    is a manifest it knows.
    """
    file = os.fspath(path)
    if not file.endswith(MANIFEST_NAME):
        file = os.path.join(file, MANIFEST_NAME)
    try:
        return orjson.loads(Path(file).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SourceError(f"cannot read {what} {file}: {exc}") from exc


def check_regular_file(path: str) -> None:
    """InputError unless `path` is a regular file (or a symlink to one); SourceError when it cannot be stat'ed."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise SourceError(os_error_line("read", path, exc)) from exc
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _NOT_REGULAR if test(mode)), "of an unknown kind")
        raise InputError(f"{path} is {kind}, not a regular file: fwe reads only regular files "
                         "(write the data to a file first)")


def bootstrap_manifest_path(path: str) -> str | None:
    """The manifest of the bootstrap at `path` (a directory's manifest.json, or a single file's sidecar), or None
    when `path` is not a bootstrap (a token directory's manifest is not a bootstrap's)."""
    if os.path.isdir(path):
        manifest = os.path.join(path, MANIFEST_NAME)
    else:
        manifest = path + SIDECAR_MANIFEST_SUFFIX
    if not os.path.isfile(manifest):
        return None
    try:
        found = read_manifest(manifest)
    except SourceError:
        return manifest  # damaged: reading it says so, naming it
    return None if is_token_manifest(found) else manifest


def no_text(token_dir: str) -> SourceError:
    """What reading a token directory as text raises."""
    return SourceError(f"{token_dir} is a token directory (token shards, no text): the loader reads it as "
                       "--local-path; text readers cannot")


def is_token_manifest(manifest: object) -> bool:
    """Whether a parsed manifest is a token directory's (not a bootstrap's)."""
    from fwe_cli.loader.files.token_shards import TOKENS_FORMAT  # numpy's module: only where a manifest is read

    return isinstance(manifest, dict) and manifest.get("format") == TOKENS_FORMAT


def resolve_files(path: str, allow_partial: bool = False, verify_parts: bool = False) -> list[str]:
    """The files a local path names, in the order they are read, checked as the module docstring says.

    Raises SourceError when there are none or a bootstrap is incomplete (unless `allow_partial`) or lacks a part;
    InputError for a file that is not regular or a bootstrap part that differs from its manifest."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, MANIFEST_NAME)):
            return _bootstrap_parts(path, allow_partial, verify_parts)
        files = sorted(os.path.join(path, *names) for names in _walk(path) if supported(names[-1]))
    elif os.path.exists(path):
        if not supported(path):
            raise SourceError(f"{path}: unsupported file type (expected one of {', '.join(SUPPORTED_SUFFIXES)})")
        check_regular_file(path)
        if os.path.isfile(path + SIDECAR_MANIFEST_SUFFIX):
            _check_parts(path, _bootstrap_manifest(path + SIDECAR_MANIFEST_SUFFIX), verify_parts)
        files = [path]
    else:
        files = sorted(f for f in _glob(path) if not os.path.isdir(f) and supported(f))
        if not files and not glob.has_magic(path):
            if os.path.isfile(path + SIDECAR_MANIFEST_SUFFIX):
                raise SourceError(
                    f"bootstrap to {path} is incomplete ({path + SIDECAR_MANIFEST_SUFFIX} says complete=false; a "
                    "single-file bootstrap appears under its name only when done): finish it by re-running "
                    "`fwe bootstrap` with the same arguments"
                )
            raise SourceError(f"{path}: no such file or directory")
    if not files:
        raise SourceError(f"{path}: no {'/'.join(SUPPORTED_SUFFIXES)} files found")
    files = _once(files)
    for file in files:
        check_regular_file(file)
    return files


def manifest_problem(manifest: object) -> str | None:
    """Why a parsed manifest is not a bootstrap's (None when its shape is right): an object whose `files` are
    {name, bytes} entries, each name a plain file name beside the manifest (no folder, no '..': a manifest must not
    make a reader or --force reach outside its bootstrap)."""
    if not isinstance(manifest, dict):
        return "not an object"
    entries = manifest.get("files", [])
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("bytes"), int)
            and not isinstance(e.get("bytes"), bool) and e["bytes"] >= 0 for e in entries):
        return "its files need a name and a byte count each"
    bad = next((e["name"] for e in entries if e["name"] in ("", ".", "..") or "/" in e["name"] or "\\" in e["name"]
                or "\0" in e["name"]), None)
    if bad is not None:
        return f"it lists {bad!r}, which is not a plain file name beside the manifest"
    return None


def _bootstrap_manifest(manifest_path: str) -> dict:
    manifest = read_manifest(manifest_path)
    if is_token_manifest(manifest):
        raise no_text(os.path.dirname(manifest_path))
    problem = manifest_problem(manifest)
    if problem is not None:
        raise SourceError(f"{manifest_path} is not a bootstrap manifest ({problem})")
    return manifest


def _bootstrap_parts(path: str, allow_partial: bool, verify_parts: bool) -> list[str]:
    manifest = _bootstrap_manifest(os.path.join(path, MANIFEST_NAME))
    if not manifest.get("complete") and not allow_partial:
        raise SourceError(
            f"bootstrap at {path} is incomplete (manifest says complete=false): finish it by re-running "
            "`fwe bootstrap` with the same arguments, or pass --allow-partial to read what is there"
        )
    files = [os.path.join(path, entry["name"]) for entry in manifest["files"]]
    missing = [f for f in files if not os.path.lexists(f)]
    if missing:
        raise SourceError(f"bootstrap at {path} lists files that are missing: {', '.join(missing[:3])}")
    _check_parts(path, manifest, verify_parts)
    return files


def _check_parts(out: str, manifest: dict, verify_parts: bool) -> None:
    """InputError unless every part the manifest lists is a regular file of the recorded size (and sha256)."""
    single = out.endswith(".jsonl")  # X.jsonl + X.jsonl.manifest.json, else a directory with manifest.json
    directory = os.path.dirname(os.path.abspath(out)) if single else out
    if verify_parts and not all(isinstance(entry.get("sha256"), str) for entry in manifest["files"]):
        where = out + SIDECAR_MANIFEST_SUFFIX if single else os.path.join(out, MANIFEST_NAME)
        raise SourceError(f"{where} records no sha256 for some parts: they cannot be verified")
    for entry in manifest["files"]:
        check_regular_file(os.path.join(directory, entry["name"]))
    problems = listed_file_problems(directory, manifest, rehash=verify_parts)
    if problems:
        listed = "; ".join(f"{os.path.join(directory, p['name'])}: {p['problem']}" for p in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise InputError(f"bootstrap at {out} changed after it was written: {listed}{more}; "
                         f"`fwe bootstrap --verify --out {out}` lists every damaged part, and re-running the bootstrap "
                         "with its original arguments and --force stages it again")


def _walk(top: str) -> Iterator[list[str]]:
    """The path components below `top` of every non-directory entry, entering each real directory once.

    Directory symlinks are followed (data linked in from another disk is read), but a directory whose real path was
    entered already is not entered again, so a loop ends at its first turn. Sorted, so which of two routes to one
    directory is taken does not depend on the file system's listing order."""
    entered: set[str] = set()
    for root, dirs, names in os.walk(top, followlinks=True):
        real = os.path.realpath(root)
        if real in entered:
            dirs[:] = []
            continue
        entered.add(real)
        dirs.sort()
        prefix = [] if root == top else os.path.relpath(root, top).split(os.sep)
        for name in sorted(names):
            yield prefix + [name]


def _glob(pattern: str) -> list[str]:
    """The paths a glob names; `**` (a whole component) matches any depth, through `_walk`, which cannot loop.

    Python's glob follows directory symlinks under `**` until the OS refuses the path (ELOOP, about 40 levels), so a
    link loop gives each file dozens of times (and two loops in one directory, exponentially many)."""
    parts = pattern.split(os.sep)
    if "**" not in parts:
        return glob.glob(pattern)  # each component matches one directory's entries: nothing to loop over
    fixed = list(itertools.takewhile(lambda part: not glob.has_magic(part), parts))
    root = os.sep.join(fixed) or (os.sep if fixed else "")
    rest = parts[len(fixed):]
    if root and not os.path.isdir(root):
        return []
    return [os.path.join(root, *names) for names in _walk(root or os.curdir) if _match(rest, names)]


def _match(patterns: list[str], names: list[str]) -> bool:
    """Whether path components `names` match glob components `patterns`, as glob.glob(recursive=True) would: `**`
    takes zero or more components, and no wildcard matches a name starting with '.' (hidden) that it does not
    spell out."""
    if not patterns:
        return not names
    head, tail = patterns[0], patterns[1:]
    if head == "**":
        return any(_match(tail, names[skip:]) for skip in range(len(names) + 1)
                   if not any(name.startswith(".") for name in names[:skip]))
    if not names or (names[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatch(names[0], head) and _match(tail, names[1:])


def _once(paths: list[str]) -> list[str]:
    """`paths` without a second path to a file already listed (same real path), first one kept."""
    seen: set[str] = set()
    out = []
    for path in paths:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append(path)
    return out

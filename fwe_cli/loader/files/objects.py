"""The files a URL names in an object store (s3://, gs://, az://, hf://: remote.object_store), as files.listing says
for a local path: one object, every supported object below a prefix (sorted), a glob, or a bootstrap (a prefix
holding manifest.json, or X.jsonl beside X.jsonl.manifest.json) whose parts are checked against its manifest (sizes,
from the listing; sha256 with verify_parts, reading each part once).

What the listing saw of each object (size, version) is remembered in this process (`known`), so the readers
(files.formats, files.read) open an object by its URL without asking again, and pin their reads to that version.
"""

from __future__ import annotations

import hashlib
import io

import orjson

from fwe_cli.errors import InputError, SourceError
from fwe_cli.loader.files.listing import (
    MANIFEST_NAME,
    SIDECAR_MANIFEST_SUFFIX,
    SUPPORTED_SUFFIXES,
    is_token_manifest,
    manifest_problem,
    no_text,
    supported,
)
from fwe_cli.loader.remote.object_store import ObjectInfo, Store, store_for

_known: dict[str, tuple[ObjectInfo, dict]] = {}


def remember(objects: list[ObjectInfo], options: dict) -> None:
    """What a listing saw of these objects, for the readers of this process (and its forked children)."""
    for obj in objects:
        _known[obj.url] = (obj, options)


def known(url: str) -> tuple[Store, ObjectInfo]:
    """The Store and ObjectInfo of an object a listing saw (else asked now, with no storage options)."""
    found = _known.get(url)
    if found is None:
        store = store_for(url)
        obj = store.info(url)
        if obj is None:
            raise SourceError(f"{url}: no such object")
        remember([obj], {})
        return store, obj
    return store_for(url, found[1]), found[0]


def open_object(url: str, start: int = 0, until: int | None = None) -> io.BufferedReader:
    """The object as a buffered file from byte `start`, fetching ahead up to `until` (remote.range_file)."""
    from fwe_cli.loader.remote.range_file import open_sequential

    store, obj = known(url)
    return open_sequential(url, obj.size, lambda a, b: store.read(obj, a, b), start, until)


def read_object(url: str, options: dict) -> bytes:
    """A small object whole (a manifest)."""
    store = store_for(url, options)
    obj = store.info(url)
    if obj is None:
        raise SourceError(f"{url}: no such object")
    return store.read(obj, 0, obj.size)


def join(url: str, name: str) -> str:
    return url.rstrip("/") + "/" + name


def bootstrap_manifest_url(url: str, options: dict) -> str | None:
    """The manifest of the bootstrap at `url` (a prefix's manifest.json, or an object's sidecar), or None. The
    listing made to say so is kept for the next `resolve_objects` of the URL (the source being opened) only."""
    return _listed(url, options, keep=True)[1]


_listings: dict[tuple, tuple[list[ObjectInfo], str | None]] = {}


def _listed(url: str, options: dict, keep: bool = False) -> tuple[list[ObjectInfo], str | None]:
    """(the objects `url` names as a prefix or an object, its bootstrap manifest or None): a reader's class is chosen
    by the manifest (`keep`: the listing stays for the next call), then the same listing is read (taken, so a source
    opened later lists anew); a URL with nothing below it names its bucket when that is what is missing."""
    key = (url, orjson.dumps(options, option=orjson.OPT_SORT_KEYS))
    if not keep and key in _listings:
        return _listings.pop(key)
    if key not in _listings:
        store = store_for(url, options)
        listed = [] if any(c in url.split("://", 1)[1] for c in "*?[") else store.find(url)
        if not listed and not store.fs.exists(url.split("://", 1)[0] + "://" + url.split("://", 1)[1].split("/")[0]):
            raise SourceError(f"{url}: the bucket does not exist")
        _listings[key] = (listed, _manifest_url(store, url, listed, options))
    return _listings[key] if keep else _listings.pop(key)


def _manifest_url(store: Store, url: str, listed: list[ObjectInfo], options: dict) -> str | None:
    names = {obj.url for obj in listed}
    single = names == {url}
    for candidate in (url + SIDECAR_MANIFEST_SUFFIX,) if single else (join(url, MANIFEST_NAME),):
        if candidate in names or (single and store.info(candidate) is not None):
            try:
                found = orjson.loads(read_object(candidate, options))
            except orjson.JSONDecodeError:
                return candidate  # damaged: reading it says so, naming it
            return None if is_token_manifest(found) else candidate
    return None


def resolve_objects(url: str, options: dict, allow_partial: bool = False,
                    verify_parts: bool = False) -> list[ObjectInfo]:
    """The objects `url` names, in the order they are read (see the module docstring); SourceError when there are
    none, InputError for a bootstrap part that differs from its manifest."""
    store = store_for(url, options)
    listed, manifest_url = _listed(url, options)
    if manifest_url is not None:
        objects = _bootstrap_parts(store, url, manifest_url, listed, options, allow_partial, verify_parts)
    elif any(c in url.split("://", 1)[1] for c in "*?["):
        objects = [o for o in store.glob(url) if supported(o.url)]
    else:
        objects = [o for o in listed if supported(o.url) or o.url == url]
        if len(objects) == 1 and objects[0].url == url and not supported(url):
            raise SourceError(f"{url}: unsupported file type (expected one of {', '.join(SUPPORTED_SUFFIXES)})")
    if not objects:
        raise SourceError(f"{url}: no {'/'.join(SUPPORTED_SUFFIXES)} objects found")
    remember(objects, options)
    return objects


def read_manifest_object(url: str, options: dict) -> object:
    """A bootstrap manifest in an object store, parsed (SourceError naming it when it is not JSON)."""
    try:
        return orjson.loads(read_object(url, options))
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"cannot read bootstrap manifest {url}: {exc}") from exc


def _bootstrap_parts(store: Store, url: str, manifest_url: str, listed: list[ObjectInfo], options: dict,
                     allow_partial: bool, verify_parts: bool) -> list[ObjectInfo]:
    manifest = read_manifest_object(manifest_url, options)
    if is_token_manifest(manifest):
        raise no_text(url)
    problem = manifest_problem(manifest)
    if problem is not None:
        raise SourceError(f"{manifest_url} is not a bootstrap manifest ({problem})")
    if not manifest.get("complete") and not allow_partial:
        raise SourceError(f"bootstrap at {url} is incomplete (manifest says complete=false): finish it by re-running "
                          "`fwe bootstrap` with the same arguments, or pass --allow-partial to read what is there")
    directory = url if manifest_url.endswith("/" + MANIFEST_NAME) else url.rsplit("/", 1)[0]
    listed = {o.url: o for o in (listed if directory == url else store.find(directory))}
    objects, problems = [], []
    for entry in manifest["files"]:
        obj = listed.get(join(directory, entry["name"]))
        if obj is None:
            raise SourceError(f"bootstrap at {url} lists files that are missing: {join(directory, entry['name'])}")
        if obj.size != entry["bytes"]:
            problems.append(f"{obj.url}: {obj.size} bytes, manifest says {entry['bytes']}")
        elif verify_parts:
            if not isinstance(entry.get("sha256"), str):
                raise SourceError(f"{manifest_url} records no sha256 for some parts: they cannot be verified")
            if hashlib.sha256(store.read(obj, 0, obj.size)).hexdigest() != entry["sha256"]:
                problems.append(f"{obj.url}: sha256 differs from the manifest")
        objects.append(obj)
    if problems:
        raise InputError(f"bootstrap at {url} changed after it was written: {'; '.join(problems[:3])}: re-run the "
                         "bootstrap with its original arguments and --force")
    return objects


def fingerprint(objects: list[ObjectInfo]) -> list[dict]:
    """Each object's URL, size and version (ETag, generation): a resume refuses an object replaced since."""
    return [{"path": o.url, "bytes": o.size, "version": o.version} for o in objects]

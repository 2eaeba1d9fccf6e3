"""Object stores (s3://, gs://, az:// / abfs://, hf://, any fsspec URL): one fsspec filesystem per protocol and
storage options, made lazily in each process (a DataLoader worker forked from a loader makes its own: an s3fs client
and its event loop do not survive a fork), and the few calls fwe makes of it.

Credentials and endpoints come from where the filesystem's own tools read them (botocore: AWS_* variables, profiles,
AWS_ENDPOINT_URL; gcsfs: GOOGLE_APPLICATION_CREDENTIALS; adlfs: AZURE_STORAGE_*; hf: HF_TOKEN); `storage_options`
(`--storage-option KEY=VALUE`, as `storage_options` in `datasets`) passes the rest. The filesystem's own retries are
turned off where it has them (s3fs, botocore): every call goes through transient.call_with_retries, whose backoff
and budget are the loader's, and each retry is counted by reason (`Store.retried`, in the source's artifact record).
A range read of S3 is pinned to the ETag the listing saw (If-Match): an object replaced mid-run fails the read
naming it (store_errors) rather than mixing two versions.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Callable, TypeVar

from fwe_cli.errors import ConfigError
from fwe_cli.loader.remote.store_errors import TransientStoreError, normalized, store_error
from fwe_cli.loader.remote.transient import RetryPolicy, call_with_retries

T = TypeVar("T")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# scheme -> (the package its fsspec filesystem needs, fwe's extra that installs it)
PACKAGES = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"),
            "az": ("adlfs", "azure"), "abfs": ("adlfs", "azure"), "abfss": ("adlfs", "azure"),
            "hf": ("huggingface_hub", None)}
STORE_RETRY = RetryPolicy(attempts=8, base_wait_s=0.1, max_wait_s=20.0, deadline_s=300.0)
"""Object-store requests: AWS's standard retry mode (a 100 ms base, full jitter, at most 20 s a wait), with more
attempts (a 503 SlowDown asks for them) under a 5-minute deadline (a loader's --timeout bounds it further)."""
VERSION_KEYS = ("ETag", "etag", "generation", "version_id", "VersionId", "blob_id", "sha")


def scheme(path: str) -> str | None:
    """The URL scheme of `path` (lower case), None for a plain path."""
    found = _SCHEME.match(path) if isinstance(path, str) else None
    return found[1].lower() if found else None


def is_url(path: str) -> bool:
    """Whether `path` names an object store (any URL but file://, which is this machine's disk)."""
    return scheme(path) not in (None, "file", "local")


def local_or_url(path: str) -> str:
    """A path as a record keeps it: a URL as given, a local path absolute."""
    return path if is_url(path) else os.path.abspath(path)


@dataclass(frozen=True)
class ObjectInfo:
    """One object as a listing saw it."""

    url: str
    size: int
    version: str | None = None
    """Its ETag (S3, Azure), generation (GCS) or content id (hf://): what a resume and a pinned read compare."""


class Store:
    """The filesystem of one protocol and storage options, in this process, with fwe's retries and error lines."""

    def __init__(self, protocol: str, options: dict):
        self.protocol = protocol
        self.options = dict(options)
        self.retried: Counter = Counter()
        """Retries made, by reason ("HTTP 503", "ClientPayloadError", ...)."""
        self.requests = 0
        """Calls made (each attempt once)."""
        self.bytes_read = 0
        """Bytes of objects read (range reads)."""
        self._lock = threading.Lock()
        self._fs = None
        self._pid = None

    @property
    def fs(self):
        """The fsspec filesystem, made on first use in each process. A forked child keeps its parent's referenced, so
        that its finalizer (closing the client's session) never runs there: the connections are the parent's."""
        if self._fs is None or self._pid != os.getpid():
            with self._lock:
                if self._fs is None or self._pid != os.getpid():
                    _inherited.append(self._fs)
                    self._fs, self._pid = _make_filesystem(self.protocol, self.options), os.getpid()
        return self._fs

    def call(self, fn: Callable[[], T], what: str, url: str) -> T:
        """fn() with retries of transient failures (counted), its other failures one line naming `url`."""
        last: list[str] = []

        def attempt():
            with self._lock:
                self.requests += 1
            try:
                return fn()
            except Exception as exc:  # classified for the retry loop: transient ones keep an HTTP-like shape
                err = normalized(exc)
                last[:] = [getattr(err, "reason", type(err).__name__)]
                if err is exc:
                    raise
                raise err from exc

        def sleep(seconds: float) -> None:
            with self._lock:
                self.retried[last[0] if last else "unknown"] += 1
            import time

            time.sleep(seconds)

        try:
            return call_with_retries(attempt, f"{what} {url}", STORE_RETRY, sleep=sleep, fail_fast=True)
        except Exception as exc:
            raise store_error(exc, url, what, self.protocol) from exc

    def find(self, url: str) -> list[ObjectInfo]:
        """The objects at `url`: itself when it is one, else every object below it (a prefix), sorted by URL."""
        def listing():
            found = self.fs.find(url, detail=True, withdirs=False)
            if not found and self.fs.isfile(url):
                found = {url: self.fs.info(url)}
            return found

        found = self.call(listing, "list", url)
        return sorted((self._info(name, info) for name, info in found.items()), key=lambda o: o.url)

    def glob(self, pattern: str) -> list[ObjectInfo]:
        found = self.call(lambda: self.fs.glob(pattern, detail=True), "list", pattern)
        return sorted((self._info(name, info) for name, info in found.items() if info.get("type") != "directory"),
                      key=lambda o: o.url)

    def info(self, url: str) -> ObjectInfo | None:
        """The object at `url`, None when there is none."""
        def one():
            try:
                return self.fs.info(url)
            except FileNotFoundError:
                return None

        found = self.call(one, "read", url)
        return None if found is None or found.get("type") == "directory" else self._info(url, found)

    def _info(self, name: str, info: dict) -> ObjectInfo:
        version = next((str(info[k]) for k in VERSION_KEYS if info.get(k) not in (None, "")), None)
        if version is None and info.get("mtime") is not None:  # a filesystem without versions: its mtime
            version = str(info["mtime"])
        return ObjectInfo(self.url(name), int(info.get("size") or 0), version)

    def url(self, name: str) -> str:
        """A path the filesystem returned, as a URL of this protocol."""
        return name if scheme(name) else f"{self.protocol}://{name.lstrip('/')}"

    def read(self, obj: ObjectInfo, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object, of the version listed (S3: If-Match its ETag); a body cut short is
        retried like any transient failure."""
        if end <= start:
            return b""

        def get() -> bytes:
            if self.protocol in ("s3", "s3a") and obj.version:
                data = _s3_range(self.fs, obj, start, end)
            else:
                data = self.fs.cat_file(obj.url, start=start, end=end)
            if len(data) != end - start:
                raise TransientStoreError(f"ShortBody ({len(data)} of {end - start} bytes)")
            with self._lock:
                self.bytes_read += len(data)
            return data

        return self.call(get, "read", obj.url)

    def write(self, url: str, data: bytes) -> None:
        """Put a small object whole (a manifest)."""
        self.call(lambda: self.fs.pipe_file(url, data), "write", url)

    def remove(self, url: str) -> None:
        self.call(lambda: self.fs.rm_file(url), "delete", url)

    def describe(self) -> dict:
        return {"protocol": self.protocol, "requests": self.requests, "bytes_read": self.bytes_read,
                "retries": sum(self.retried.values()),
                "retried": dict(self.retried)}


def _s3_range(fs, obj: ObjectInfo, start: int, end: int) -> bytes:
    """A range GET of S3 through s3fs's own client, conditional on the listed ETag (412 when it changed)."""
    from fsspec.asyn import sync

    bucket, key, _ = fs.split_path(obj.url)

    async def get() -> bytes:
        answer = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}",
                                   IfMatch=obj.version)
        try:
            return await answer["Body"].read()
        finally:
            answer["Body"].close()

    return sync(fs.loop, get)


_stores: dict[tuple, Store] = {}
_inherited: list = []
"""Filesystems this process inherited from the one it was forked from (Store.fs): never closed here."""
_stores_lock = threading.Lock()


ENV_PREFIXES = ("AWS_", "GOOGLE_", "AZURE_", "HF_")
"""The variables the filesystems read their credentials and endpoints from: a Store is made anew when they change."""


def store_for(url: str, options: dict | None = None) -> Store:
    """The Store of `url`'s protocol and `options` in this process (one per pair and environment, shared by its
    threads)."""
    import orjson

    protocol = scheme(url) or "file"
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)))
    key = (protocol, orjson.dumps(options or {}, option=orjson.OPT_SORT_KEYS), env)
    with _stores_lock:
        if key not in _stores:
            _stores[key] = Store(protocol, options or {})
        return _stores[key]


def _make_filesystem(protocol: str, options: dict):
    """The fsspec filesystem of `protocol`, its own retries off (fwe retries: Store.call); ConfigError with the pip
    install line when its package is missing."""
    import fsspec

    package, extra = PACKAGES.get(protocol, (None, None))
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError) as exc:
        install = f"pip install 'fwe[{extra}]'" if extra else f"pip install {package or protocol + 'fs'}"
        raise ConfigError(f"{protocol}:// URLs need the {package or protocol} package, which is not installed: "
                          f"{install}") from exc
    options = dict(options)
    if protocol in ("s3", "s3a"):
        config = dict(options.pop("config_kwargs", {}) or {})
        config.setdefault("retries", {"total_max_attempts": 1})  # botocore's own retries: off (fwe counts its own)
        fs = cls(config_kwargs=config, skip_instance_cache=True, **options)
        fs.retries = 1  # s3fs's own retry loop: off
        if fs.session is None:  # the session s3fs would make, with one handler more (its clients copy it)
            from aiobotocore.session import AioSession

            fs.session = AioSession(**fs.kwargs)
            fs.session.register("before-send.s3", _small_body_at_once)
        return fs
    return cls(skip_instance_cache=True, **options)


SMALL_BODY = 1 << 20


def _small_body_at_once(request, **kwargs) -> None:
    """botocore asks for `Expect: 100-continue` before every PUT's body: a round trip spent waiting for the server's
    go-ahead, worth it for a large body (a refused one is never sent), not for a small one (a manifest, a probe, a
    small part). The header is not signed, so it can go."""
    if "Expect" in request.headers and int(request.headers.get("Content-Length") or SMALL_BODY) < SMALL_BODY:
        del request.headers["Expect"]

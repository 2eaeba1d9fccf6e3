"""Download a Hub listing's parquet files for `fwe bootstrap`: several at once, each resumable and verified.

    downloads = Downloads(listing.repo, listing.revision, files, "/data/out/.fwe-hub-download", ahead=2)
    path = downloads.wait(0)      # file 0 downloaded and its sha256 checked; files 1.. download meanwhile
    downloads.release(0)          # converted: delete it, start the next one
    downloads.close()

A file is written as `<name>.part`; an interrupted download (cut connection, Ctrl-C, kill -9) continues from the
bytes already there with `Range: bytes=N-`. When all bytes are in, its sha256 (hashed while downloading, the
prefix re-read on a resume) must equal the LFS sha256 of the listing: then it is renamed to `<name>`. A mismatch
deletes it and downloads it once more; a second mismatch is a SourceError naming the file. A file found complete
from an earlier run is re-hashed before it is trusted. At most `ahead` files are downloaded or waiting to be
converted at a time (bounding disk use), in listing order, each on its own connection.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from fwe_cli.errors import OutputError, SourceError
from fwe_cli.loader.sources.hub_listing import HubFile
from fwe_cli.loader.hub_env import resolve_url
from fwe_cli.loader.sources.hub_ranges import REQUEST_TIMEOUT_S
from fwe_cli.loader.transient import attempts_note, retry_wait, transient_reason
from fwe_cli.output.os_errors import on_output
from fwe_cli.output.verify import hash_into, sha256_file

DEFAULT_AHEAD = 2


class Cancelled(Exception):
    """close() was called while the download was running."""


def local_name(file: HubFile) -> str:
    return file.path.replace("/", "--")


def _hashed(path: str):
    """A sha256 object fed with the file's bytes so far, to go on with what a download appends."""
    digest = hashlib.sha256()
    hash_into(digest, path)
    return digest


def _fetch_once(url: str, part: str, digest, total: int, stop: threading.Event):
    """One GET from the end of `part`; appends what arrives. Returns the digest (a fresh one if restarted at 0)."""
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    have = os.path.getsize(part)
    headers = build_hf_headers()
    headers["Range"] = f"bytes={have}-"
    with get_session().stream("GET", url, headers=headers, follow_redirects=True,
                              timeout=REQUEST_TIMEOUT_S) as response:
        if response.status_code == 416 and have >= total:
            return digest
        if response.status_code >= 400:
            response.read()
            hf_raise_for_status(response)
        mode = "ab"
        if response.status_code != 206:  # the server sent the whole file: start again from byte 0
            digest, mode = hashlib.sha256(), "wb"
        with on_output("create", part):
            out = open(part, mode)
        with out:
            for block in response.iter_bytes():  # as received: a cut connection keeps what came
                if stop.is_set():
                    raise Cancelled(url)
                with on_output("write", part):  # the disk's errors, not the network's: exit 8 or 7, not 4
                    out.write(block)
                digest.update(block)
    return digest


def _fill(url: str, part: str, file: HubFile, stop: threading.Event) -> str:
    """Bring `part` to the file's size (resuming); returns its sha256. Transient failures are retried, at once
    when the failed request had received bytes, else as the Hub retry policy says (transient.retry_wait)."""
    if not os.path.exists(part):
        with on_output("create", part):
            open(part, "wb").close()
    digest = _hashed(part)
    failures, since = 0, time.monotonic()
    while os.path.getsize(part) < file.size:
        before = os.path.getsize(part)
        try:
            digest = _fetch_once(url, part, digest, file.size, stop)
        except (Cancelled, OutputError):  # stopped, or the download folder cannot be written: no retry helps
            raise
        except Exception as exc:  # httpx/huggingface_hub raise many types; the cause stays chained
            progressed = os.path.getsize(part) > before
            failures, since = (0, time.monotonic()) if progressed else (failures + 1, since)
            wait = 0.0 if progressed and transient_reason(exc) else retry_wait(exc, failures, since, f"reading {url}")
            if wait is None:
                raise SourceError(f"cannot download {url}{attempts_note(exc)}: {exc}") from exc
            digest = _hashed(part)  # what the cut request appended is kept
            if wait:
                stop.wait(wait)
            if stop.is_set():
                raise Cancelled(url) from None
            continue
        if os.path.getsize(part) == before:
            raise SourceError(f"{url}: the server sent no bytes after byte {before} of {file.size}")
    if os.path.getsize(part) != file.size:
        raise SourceError(f"{url}: downloaded {os.path.getsize(part)} bytes, the listing says {file.size}")
    return digest.hexdigest()


def download_file(url: str, file: HubFile, dest: str, stop: threading.Event | None = None) -> str:
    """`file` at `dest`, downloaded (or resumed from `dest`.part) and verified; returns `dest`."""
    stop = stop or threading.Event()
    part = dest + ".part"
    if os.path.exists(dest):  # complete from an earlier run: trusted only if it still hashes right
        if os.path.getsize(dest) == file.size and (
                file.sha256 is None or sha256_file(dest) == file.sha256):
            return dest
        with on_output("remove", dest):
            os.remove(dest)
    for attempt in (1, 2):
        sha = _fill(url, part, file, stop)
        if file.sha256 is None or sha == file.sha256:
            with on_output("rename", part):
                os.replace(part, dest)
            return dest
        with on_output("remove", part):
            os.remove(part)
    raise SourceError(f"{file.path}: sha256 {sha} of the download differs from the Hub listing's {file.sha256} "
                      "(twice): the file or the listing changed; re-run, or pass --force to start over")


class Downloads:
    """Files of one bootstrap downloaded in order into `directory`: at most `ahead` at a time that are not yet
    released (converted), and, beyond the first of them, only those `wanted(index)` agrees to (the target may be
    reached before them)."""

    def __init__(self, repo: str, revision: str, files: list[HubFile], directory: str,
                 ahead: int = DEFAULT_AHEAD, first: int = 0, wanted=lambda index: True):
        self.repo, self.revision, self.files, self.directory = repo, revision, files, directory
        self.ahead, self.wanted = max(1, ahead), wanted
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=self.ahead, thread_name_prefix="fwe-hub-download")
        self._futures: dict[int, Future] = {}
        self._low = first
        keep = {local_name(f) + suffix for f in files[first:] for suffix in ("", ".part")}
        with on_output("prepare download folder", directory):
            os.makedirs(directory, exist_ok=True)
            for name in os.listdir(directory):  # files of earlier runs that are converted already, or not ours
                if name not in keep:
                    os.remove(os.path.join(directory, name))
        self.schedule()

    def path(self, index: int) -> str:
        return os.path.join(self.directory, local_name(self.files[index]))

    def _start(self, index: int) -> None:
        if index not in self._futures:
            url = resolve_url(self.repo, self.revision, self.files[index].path)
            self._futures[index] = self._pool.submit(download_file, url, self.files[index], self.path(index),
                                                     self._stop)

    def schedule(self) -> None:
        """Start the downloads the window allows (call again when `wanted` may have changed its mind)."""
        for index in range(self._low, min(self._low + self.ahead, len(self.files))):
            if index not in self._futures and index > self._low and not self.wanted(index):
                return
            self._start(index)

    def done(self, index: int) -> bool:
        """Whether wait(index) would return (or raise) at once."""
        return index in self._futures and self._futures[index].done()

    def wait(self, index: int) -> str:
        """The local path of file `index` once downloaded and verified (started now if it was not); SourceError
        when it cannot be."""
        self._start(index)
        return self._futures[index].result()

    def release(self, index: int) -> None:
        """File `index` is converted: delete it and start the next downloads."""
        self._futures.pop(index, None)
        with on_output("remove", self.path(index)):
            try:
                os.remove(self.path(index))
            except FileNotFoundError:
                pass
        self._low = max(self._low, index + 1)
        self.schedule()

    def close(self) -> None:
        """Stop every download (partial ones stay as .part for a resume) and wait for the threads to end."""
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


def remove_tree(directory: str) -> None:
    """Delete the download folder and what is in it (after a complete run, or --force)."""
    if os.path.isdir(directory):
        with on_output("remove download folder", directory):
            for name in os.listdir(directory):
                os.remove(os.path.join(directory, name))
            os.rmdir(directory)

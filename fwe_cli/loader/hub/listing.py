"""Which parquet files a Hub dataset config reads, at a pinned commit: resolved as `datasets` does, cached on disk.

`datasets` turns a config into files through the dataset card's `configs:` (config_name -> data_files, a split's
path patterns such as `sample/10BT/*`), globs them against the repository and reads the matches in sorted path order.
This module does the same with two requests (hub.api: the dataset's info at a revision: commit sha, card and file
names; then paths-info: sizes and LFS sha256 of the matches) and keeps the result per (repo, config, split, commit) under the
Hugging Face cache, so a warm start re-validates with one HEAD request (the commit a branch points at), or none when
the revision is a commit sha already listed or HF_HUB_OFFLINE=1.

Many ranks ask once: processes sharing a cache (a node's ranks) resolve one at a time under a lock (node_lock), and
the ref records when its commit was checked and by which process, so a rank that comes after another rank checked
(since it started, within FRESH_S) reads the cache without a request; in a torch.distributed job, rank 0 resolves and
the others are told (job_ranks).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Callable

import orjson

from fwe_cli.artifacts import write_atomic
from fwe_cli.errors import SourceError
from fwe_cli.loader.hub.api import dataset_at, head_revision, paths_info
from fwe_cli.loader.hub.data_files import match_files, split_patterns
from fwe_cli.loader.remote.hub_env import fwe_cache_dir, offline
from fwe_cli.loader.remote.job_ranks import share
from fwe_cli.loader.remote.node_lock import node_lock, process_started_at
from fwe_cli.loader.remote.transient import hub_budget_s

LISTING_FORMAT = 1
PATHS_INFO_BATCH = 1000  # the Hub answers at most this many paths per paths-info call
_SHA = re.compile(r"^[0-9a-f]{40}$")
LOCK_WAIT_S = 60.0  # waiting for another rank's listing, outside a loader (whose --timeout bounds it otherwise)
FRESH_S = 60.0  # another process's check of a branch is reused this long (and only by processes started before it)
FirstFile = Callable[[str, str], None]


@dataclass(frozen=True)
class HubFile:
    """One data file of the listing."""

    path: str
    """Path inside the repository."""
    size: int
    """Bytes."""
    sha256: str | None
    """LFS sha256 of the content (None for a file not stored in LFS)."""


@dataclass(frozen=True)
class HubListing:
    """The files of one config's split at one commit, in the order `datasets` reads them."""

    repo: str
    config: str | None
    split: str
    revision: str
    """The commit sha everything was read at."""
    files: tuple[HubFile, ...]

    def to_dict(self) -> dict:
        return {"format": LISTING_FORMAT, "repo": self.repo, "config": self.config, "split": self.split,
                "revision": self.revision, "files": [vars(f) for f in self.files]}

    @classmethod
    def from_dict(cls, data: dict) -> "HubListing":
        return cls(data["repo"], data["config"], data["split"], data["revision"],
                   tuple(HubFile(**f) for f in data["files"]))


def _listing_path(repo: str, config: str | None, split: str, sha: str) -> str:
    return os.path.join(fwe_cache_dir(), "listings", repo.replace("/", "--"), config or "default", split, f"{sha}.json")


def _ref_path(repo: str, revision: str, folder: str = "refs") -> str:
    return os.path.join(fwe_cache_dir(), folder, repo.replace("/", "--"), revision.replace("/", "%2F"))


def _read_cached(repo: str, config: str | None, split: str, sha: str) -> HubListing | None:
    try:
        data = orjson.loads(open(_listing_path(repo, config, split, sha), "rb").read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return HubListing.from_dict(data) if data.get("format") == LISTING_FORMAT else None


def _read_ref(repo: str, revision: str) -> tuple[str | None, float, int]:
    """(the commit `revision` pointed at when last checked, when that was (wall time), by which process); (None, 0,
    0) when unknown. A ref written before checks were recorded holds the sha alone."""
    try:
        sha, *check = open(_ref_path(repo, revision), encoding="ascii").read().split()
        checked, pid = (float(check[0]), int(check[1])) if len(check) >= 2 else (0.0, 0)
    except (OSError, ValueError):
        return None, 0.0, 0
    return (sha, checked, pid) if _SHA.match(sha) else (None, 0.0, 0)


def _cached_ref(repo: str, revision: str) -> str | None:
    return _read_ref(repo, revision)[0]


def _fresh_ref(repo: str, revision: str) -> str | None:
    """The cached commit of `revision` when another process sharing this cache checked it after this one started and
    within FRESH_S: the ranks of a job started together ask once. This process's own checks are never reused (a
    loader opened again revalidates, as one process alone always did)."""
    sha, checked, pid = _read_ref(repo, revision)
    fresh = pid != os.getpid() and checked >= max(process_started_at(), time.time() - FRESH_S)
    return sha if fresh else None


def _keep(listing: HubListing, revision: str) -> None:
    """Write the listing and the ref (its commit, checked now); a cache that cannot be written costs only the next
    start its warmth."""
    try:
        write_atomic(_listing_path(listing.repo, listing.config, listing.split, listing.revision),
                     orjson.dumps(listing.to_dict()))
    except OSError:
        return
    _write_ref(listing.repo, revision, listing.revision)


def _write_ref(repo: str, revision: str, sha: str) -> None:
    """Record that `revision` was `sha` now (the time lets ranks that started before now skip asking again)."""
    try:
        write_atomic(_ref_path(repo, revision), f"{sha}\n{time.time():.3f}\n{os.getpid()}\n".encode())
    except OSError:
        pass


def listed_before(repo: str, revision: str | None) -> bool:
    """Whether this cache has listed `repo` at `revision` (default main) before: a warm start is likely."""
    revision = revision or "main"
    return _cached_ref(repo, revision) is not None


def _fetch(repo: str, config: str | None, split: str, revision: str,
           first_file: FirstFile | None = None) -> HubListing:
    """The listing from the Hub's API: the dataset at `revision`, then the sizes and LFS sha256 of the config's files
    (`first_file(commit, path)` is told the first file as soon as its name is known, before that second request)."""
    info = dataset_at(repo, revision)
    sha, names = info["sha"], [s["rfilename"] for s in info.get("siblings") or []]
    paths = match_files(names, split_patterns(info.get("cardData"), config, split, repo))
    if not paths:
        raise SourceError(f"Hub dataset {repo!r} config {config!r} split {split!r}: no file matches its data_files")
    not_parquet = [p for p in paths if not p.endswith(".parquet")]
    if not_parquet:
        raise SourceError(f"Hub dataset {repo!r}: the native reader reads parquet, and {not_parquet[0]!r} is not; "
                          "use --hub-reader datasets")
    if first_file is not None:
        first_file(sha, paths[0])
    entries = {}
    for start in range(0, len(paths), PATHS_INFO_BATCH):
        for entry in paths_info(repo, sha, paths[start:start + PATHS_INFO_BATCH]):
            if entry.get("type") == "file":
                entries[entry["path"]] = HubFile(entry["path"], int(entry["size"]), (entry.get("lfs") or {}).get("oid"))
    missing = [p for p in paths if p not in entries]
    if missing:
        raise SourceError(f"Hub dataset {repo!r} at {sha}: paths-info does not know {missing[0]!r}")
    return HubListing(repo, config, split, sha, tuple(entries[p] for p in paths))


def cached_listing(repo: str, config: str | None, split: str, revision: str | None) -> HubListing | None:
    """The listing this cache holds for `revision` (a commit sha, or the commit a branch pointed at when it was last
    listed), read from disk without a request; None when there is none."""
    revision = revision or "main"
    sha = revision if _SHA.match(revision) else _cached_ref(repo, revision)
    return _read_cached(repo, config, split, sha) if sha else None


def listing_stage(repo: str, config: str | None) -> str:
    """The loader's stage while the listing is resolved."""
    return f"opening source (Hub file listing of {repo}, config {config})"


def _from_cache(repo: str, config: str | None, split: str, revision: str) -> HubListing | None:
    """The listing when the cache answers without a request: offline (SourceError when it holds none), a commit sha
    listed before, or a branch whose commit was checked since this process started."""
    if offline():
        cached = cached_listing(repo, config, split, revision)
        if cached is None:
            raise SourceError(f"HF_HUB_OFFLINE=1 and no cached listing of {repo} ({config}, {split}) at "
                              f"{revision}: run once online, or use --local-path / --source synthetic")
        return cached
    sha = revision if _SHA.match(revision) else _fresh_ref(repo, revision)
    return _read_cached(repo, config, split, sha) if sha else None


def _resolve_here(repo: str, config: str | None, split: str, revision: str, use_cache: bool,
                  set_stage: Callable[[str], None], first_file: FirstFile | None) -> HubListing:
    """The listing as this process resolves it: from the cache when it is current, else under the cache's lock (one
    process per cache asks the Hub; those that waited find its answer)."""
    if not use_cache:
        return _fetch(repo, config, split, revision, first_file)
    found = _from_cache(repo, config, split, revision)
    if found is not None:
        return found
    lock = _ref_path(repo, revision, "locks") + ".lock"
    with node_lock(lock, hub_budget_s() or LOCK_WAIT_S, "another rank's Hub listing", set_stage):
        set_stage(listing_stage(repo, config))
        found = _from_cache(repo, config, split, revision)  # a rank that held the lock may have just resolved it
        if found is not None:
            return found
        sha = revision if _SHA.match(revision) else None
        if sha is None and _cached_ref(repo, revision) is not None:  # listed before: is the branch still there?
            sha = head_revision(repo, revision)
        cached = _read_cached(repo, config, split, sha) if sha else None
        if cached is not None:
            _write_ref(repo, revision, sha)
            return cached
        listing = _fetch(repo, config, split, revision, first_file)
        _keep(listing, revision)
        return listing


def resolve_listing(repo: str, config: str | None, split: str, revision: str | None = None, use_cache: bool = True,
                    set_stage: Callable[[str], None] = lambda stage: None,
                    first_file: FirstFile | None = None) -> HubListing:
    """The listing of (repo, config, split) at `revision` (default: main), from the cache when it is still current.

    Requests: none for a cached commit sha, offline, or a branch checked by another process sharing this cache since
    this one started; one HEAD when a branch listed before still points at a listed commit; two (info, paths-info)
    on a first start, three when the branch moved. Processes sharing a cache take turns (`set_stage` names the lock
    while one waits); in a torch.distributed job rank 0 resolves and every other rank is told, writing what it was
    told into its own cache. `first_file(commit, path)`, when the Hub is asked for the files, is told the first one
    between the two requests (its footer can be read beside the second). Raises SourceError naming the dataset on
    anything it cannot resolve.
    """
    revision = revision or "main"
    told = share(f"{repo} {config} {split} @ {revision}",
                 lambda: _resolve_here(repo, config, split, revision, use_cache, set_stage, first_file).to_dict(),
                 keep=lambda data: _keep(HubListing.from_dict(data), revision) if use_cache else None,
                 set_stage=set_stage, what="rank 0's Hub listing")
    return HubListing.from_dict(told)

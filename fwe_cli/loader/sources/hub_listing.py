"""Which parquet files a Hub dataset config reads, at a pinned commit: resolved as `datasets` does, cached on disk.

`datasets` turns a config into files through the dataset card's `configs:` (config_name -> data_files, a split's
path patterns such as `sample/10BT/*`), globs them against the repository and reads the matches in sorted path order.
This module does the same with two requests (the dataset's info at a revision: commit sha, card and file names; then
paths-info: sizes and LFS sha256 of the matches) and keeps the result per (repo, config, split, commit) under the
Hugging Face cache, so a warm start re-validates with one HEAD request (the commit a branch points at), or none when
the revision is a commit sha already listed or HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import orjson

from fwe_cli.artifacts import write_atomic
from fwe_cli.errors import SourceError
from fwe_cli.loader.hub_env import endpoint, fwe_cache_dir, head, offline, resolve_url
from fwe_cli.loader.transient import attempts_note, call_with_retries, transient_reason

LISTING_FORMAT = 1
PATHS_INFO_BATCH = 1000  # the Hub answers at most this many paths per paths-info call
_SHA = re.compile(r"^[0-9a-f]{40}$")
# Per request while resolving (httpx's connect and read timeouts): a Hub that never answers ends the run after it,
# well inside the 10 s a user waits for the message, and a working Hub starts its answer well within it. A Hub that
# cannot be reached (refused, no answer) is not asked again; one that answers 429/5xx is, with backoff (HUB_RETRY).
OPEN_TIMEOUT_S = 3.0


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


def _ref_path(repo: str, revision: str) -> str:
    return os.path.join(fwe_cache_dir(), "refs", repo.replace("/", "--"), revision.replace("/", "%2F"))


def _read_cached(repo: str, config: str | None, split: str, sha: str) -> HubListing | None:
    try:
        data = orjson.loads(open(_listing_path(repo, config, split, sha), "rb").read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return HubListing.from_dict(data) if data.get("format") == LISTING_FORMAT else None


def _cached_ref(repo: str, revision: str) -> str | None:
    try:
        sha = open(_ref_path(repo, revision), encoding="ascii").read().strip()
    except OSError:
        return None
    return sha if _SHA.match(sha) else None


def listed_before(repo: str, revision: str | None) -> bool:
    """Whether this cache has listed `repo` at `revision` (default main) before: a warm start is likely."""
    revision = revision or "main"
    return _cached_ref(repo, revision) is not None


def pattern_regex(pattern: str) -> re.Pattern:
    """A data_files glob as `datasets` reads it: `*` and `?` stay inside one path segment, `**` spans segments."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def split_patterns(card_data: dict | None, config: str | None, split: str, repo: str) -> list[str]:
    """The path patterns of `split` in config `config` of the card's `configs:` list."""
    configs = (card_data or {}).get("configs") or []
    names = [c.get("config_name", "default") for c in configs]
    match = next((c for c in configs if c.get("config_name", "default") == (config or "default")), None)
    if match is None:
        raise SourceError(f"Hub dataset {repo!r} has no config {config!r} in its card "
                          f"(configs: {', '.join(names) or 'none'}); try --hub-reader datasets for script-less layouts")
    data_files = match.get("data_files")
    if isinstance(data_files, (str, list)) and not (isinstance(data_files, list) and data_files
                                                    and isinstance(data_files[0], dict)):
        entries = [{"split": "train", "path": data_files}]
    else:
        entries = data_files or []
    for entry in entries:
        if entry.get("split") == split:
            paths = entry.get("path")
            return [paths] if isinstance(paths, str) else list(paths)
    splits = ", ".join(str(e.get("split")) for e in entries)
    raise SourceError(f"Hub dataset {repo!r} config {config!r} has no split {split!r} (splits: {splits})")


def _visible(path: str) -> bool:
    """datasets skips hidden files and folders (a name starting with '.' or '__') unless asked for them."""
    return not any(part.startswith((".", "__")) for part in path.split("/"))


def match_files(names: list[str], patterns: list[str]) -> list[str]:
    """Repository paths matching any pattern, sorted (the order `datasets` streams them in), parquet only."""
    regexes = [pattern_regex(p.lstrip("/")) for p in patterns]
    return sorted({n for n in names if _visible(n) and any(r.match(n) for r in regexes)})


def unreachable_message(reason: str) -> str:
    """The one line for a Hub that cannot be reached, with the ways to go on without it."""
    return (f"cannot reach the Hub at {endpoint()} ({reason}); without it: HF_HUB_OFFLINE=1 reads a warm cache, "
            "--local-path DIR reads files (fwe bootstrap makes them), --source synthetic needs nothing")


def _ask(call, what: str, repo: str):
    """One Hub API call, retried while the Hub answers 429/5xx; any failure as SourceError naming the dataset, and a
    Hub that cannot be reached (refused, no answer; 5xx after the retries) as the unreachable message."""
    try:
        return call_with_retries(call, what, fail_fast=True)
    except SourceError:
        raise
    except Exception as exc:  # huggingface_hub/httpx raise many types; the cause stays chained
        found = transient_reason(exc)
        if found is not None:
            raise SourceError(unreachable_message(f"{what}: {found[0]}{attempts_note(exc)}")) from None  # says it all
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise SourceError(f"Hub dataset {repo!r}: {what} failed: {type(exc).__name__}: {first_line}") from exc


def _fetch(repo: str, config: str | None, split: str, revision: str) -> HubListing:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint())
    info = _ask(lambda: api.dataset_info(repo, revision=revision, timeout=OPEN_TIMEOUT_S),
                f"reading {repo} at {revision}", repo)
    names = [s.rfilename for s in (info.siblings or [])]
    card = info.card_data.to_dict() if info.card_data is not None else None
    paths = match_files(names, split_patterns(card, config, split, repo))
    if not paths:
        raise SourceError(f"Hub dataset {repo!r} config {config!r} split {split!r}: no file matches its data_files")
    not_parquet = [p for p in paths if not p.endswith(".parquet")]
    if not_parquet:
        raise SourceError(f"Hub dataset {repo!r}: the native reader reads parquet, and {not_parquet[0]!r} is not; "
                          "use --hub-reader datasets")
    entries = {}
    for start in range(0, len(paths), PATHS_INFO_BATCH):
        batch = paths[start:start + PATHS_INFO_BATCH]
        for entry in _ask(lambda: api.get_paths_info(repo, batch, revision=info.sha, repo_type="dataset"),
                          f"listing {len(batch)} files of {repo}", repo):
            lfs = getattr(entry, "lfs", None)
            entries[entry.path] = HubFile(entry.path, int(entry.size), getattr(lfs, "sha256", None))
    missing = [p for p in paths if p not in entries]
    if missing:
        raise SourceError(f"Hub dataset {repo!r} at {info.sha}: paths-info does not know {missing[0]!r}")
    return HubListing(repo, config, split, info.sha, tuple(entries[p] for p in paths))


def _head_revision(repo: str, revision: str) -> str:
    """The commit a branch or tag points at now: one HEAD request (the X-Repo-Commit header of the card's resolve
    URL), sent without huggingface_hub's HTTP stack, whose import would cost a warm start more than its open."""
    url = resolve_url(repo, revision, "README.md")
    sha = _ask(lambda: head(url, OPEN_TIMEOUT_S).get("x-repo-commit"),
               f"checking which commit {repo}@{revision} is", repo)
    if not sha:
        raise SourceError(f"Hub dataset {repo!r}: {endpoint()} did not say which commit {revision!r} is")
    return sha


def check_reachable(repo: str, revision: str | None) -> None:
    """One HEAD of the dataset's card, so that a Hub that cannot be reached ends a run through `datasets` at once with
    the one unreachable line (datasets' own client retries a refused connection for a minute, a line per retry).
    Any answer, an error status included, means the Hub is there: `datasets` then reports what it finds."""
    url = resolve_url(repo, revision or "main", "README.md")
    try:
        _ask(lambda: head(url, OPEN_TIMEOUT_S), f"reaching {repo}", repo)
    except SourceError as exc:
        status = getattr(getattr(exc.__cause__, "response", None), "status_code", None)
        if status is None or status >= 500:
            raise


def cached_listing(repo: str, config: str | None, split: str, revision: str | None) -> HubListing | None:
    """The listing this cache holds for `revision` (a commit sha, or the commit a branch pointed at when it was last
    listed), read from disk without a request; None when there is none."""
    revision = revision or "main"
    sha = revision if _SHA.match(revision) else _cached_ref(repo, revision)
    return _read_cached(repo, config, split, sha) if sha else None


def resolve_listing(repo: str, config: str | None, split: str, revision: str | None = None,
                    use_cache: bool = True) -> HubListing:
    """The listing of (repo, config, split) at `revision` (default: main), from the cache when it is still current.

    Requests: none for a cached commit sha or offline; one HEAD when a branch listed before still points at a
    listed commit; two (info, paths-info) on a first start, three when the branch moved. Raises SourceError naming the dataset on anything it cannot resolve.
    """
    revision = revision or "main"
    if use_cache:
        sha = revision if _SHA.match(revision) else None
        if offline():
            cached = cached_listing(repo, config, split, revision)
            if cached is None:
                raise SourceError(f"HF_HUB_OFFLINE=1 and no cached listing of {repo} ({config}, {split}) at "
                                  f"{revision}: run once online, or use --local-path / --source synthetic")
            return cached
        if sha is None and _cached_ref(repo, revision) is not None:  # listed before: is the branch still there?
            sha = _head_revision(repo, revision)
        cached = _read_cached(repo, config, split, sha) if sha else None
        if cached is not None:
            write_atomic(_ref_path(repo, revision), sha.encode())
            return cached
    listing = _fetch(repo, config, split, revision)
    if use_cache:
        write_atomic(_listing_path(repo, config, split, listing.revision), orjson.dumps(listing.to_dict()))
        write_atomic(_ref_path(repo, revision), listing.revision.encode())
    return listing

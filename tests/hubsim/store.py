"""Read-only view of a hubsim root (see repos.py) as Hub repositories: files, oids, commit sha, card data.

Ids are computed the way the Hub computes them, so clients cache and compare them as on the real Hub:
a file's `oid` is its git blob sha1; large-file-storage files (parquet, or over 10 MB) carry `lfs.oid`
= sha256 of the content and their git oid is the sha1 of their LFS pointer; the commit `sha` is a sha1
over the repo's (path, oid) pairs, so it changes exactly when content does.

A repo's `main` can move (`RepoStore.move_main`: the files of another folder become its next commit); the commits
it was at before stay readable by their sha, as on the Hub.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

REPO_TYPES = {"datasets": "dataset", "models": "model"}
LFS_SUFFIXES = (".parquet", ".safetensors", ".bin", ".arrow")
LFS_MIN_BYTES = 10 * 1024 * 1024
HASH_CHUNK = 1 << 20


def _git_blob_sha1(size: int, chunks) -> str:
    digest = hashlib.sha1(f"blob {size}\0".encode())
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def _read_chunks(path: Path):
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            yield chunk


@dataclass(frozen=True)
class RepoFile:
    """One file of a repo, with the ids the Hub reports for it."""

    path: str
    """Path inside the repo, '/'-separated."""
    disk: Path
    """Where its bytes are."""
    size: int
    """Size in bytes."""
    oid: str
    """Git object id (sha1 of the blob, or of the LFS pointer for LFS files)."""
    sha256: str | None
    """sha256 of the content for LFS files, else None."""
    mtime: float
    """Modification time (for lastModified)."""

    @property
    def etag(self) -> str:
        """What the Hub sends as ETag for this file: the sha256 for LFS files, the git oid otherwise."""
        return self.sha256 or self.oid

    def tree_entry(self) -> dict:
        entry = {"type": "file", "oid": self.oid, "size": self.size, "path": self.path}
        if self.sha256:
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": len(_lfs_pointer(self))}
        return entry


def _lfs_pointer(file: "RepoFile | tuple[str, int]") -> bytes:
    sha256, size = (file.sha256, file.size) if isinstance(file, RepoFile) else file
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass
class Repo:
    """A repository at one commit: id, type ('dataset' or 'model'), files by path, commit sha, and the commits
    `main` was at before this one (by sha)."""

    repo_id: str
    repo_type: str
    files: dict[str, RepoFile]
    sha: str
    card_data: dict = field(default_factory=dict)
    earlier: dict[str, "Repo"] = field(default_factory=dict)

    def at(self, rev: str) -> "Repo | None":
        """The repo at `rev`: 'main' or this commit's sha is this one, an earlier commit's sha that one; None for
        any other revision."""
        return self if rev in ("main", self.sha) else self.earlier.get(rev)

    @property
    def last_modified(self) -> str:
        latest = max((f.mtime for f in self.files.values()), default=0.0)
        return datetime.fromtimestamp(latest, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def directories(self) -> set[str]:
        dirs = set()
        for path in self.files:
            parts = path.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:depth]))
        return dirs

    def tree(self, prefix: str, recursive: bool) -> list[dict] | None:
        """Entries below `prefix` ('' is the root) like /api/.../tree; None when prefix is not a folder."""
        prefix = prefix.strip("/")
        dirs = self.directories()
        if prefix and prefix not in dirs:
            return None
        base = prefix + "/" if prefix else ""
        entries = []
        for d in sorted(dirs):
            if d.startswith(base) and (recursive or "/" not in d[len(base):]):
                entries.append({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0,
                                "path": d})
        for path in sorted(self.files):
            if path.startswith(base) and (recursive or "/" not in path[len(base):]):
                entries.append(self.files[path].tree_entry())
        return entries


def _scan_file(repo_dir: Path, disk: Path) -> RepoFile:
    rel = disk.relative_to(repo_dir).as_posix()
    stat = disk.stat()
    lfs = rel.endswith(LFS_SUFFIXES) or stat.st_size >= LFS_MIN_BYTES
    if lfs:
        digest = hashlib.sha256()
        for chunk in _read_chunks(disk):
            digest.update(chunk)
        sha256 = digest.hexdigest()
        pointer = _lfs_pointer((sha256, stat.st_size))
        oid = _git_blob_sha1(len(pointer), [pointer])
    else:
        sha256 = None
        oid = _git_blob_sha1(stat.st_size, _read_chunks(disk))
    return RepoFile(path=rel, disk=disk, size=stat.st_size, oid=oid, sha256=sha256, mtime=stat.st_mtime)


def _card_data(files: dict[str, RepoFile]) -> dict:
    readme = files.get("README.md")
    if readme is None:
        return {}
    text = readme.disk.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 4)
    return (yaml.safe_load(text[4:end]) or {}) if end > 0 else {}


def load_repo(repo_dir: Path, repo_id: str, repo_type: str) -> Repo:
    files = {}
    for disk in sorted(repo_dir.rglob("*")):
        if disk.is_file() and not disk.name.startswith(".") and not disk.name.endswith(".tmp"):
            f = _scan_file(repo_dir, disk)
            files[f.path] = f
    listing = "".join(f"{path} {f.oid}\n" for path, f in sorted(files.items()))
    sha = hashlib.sha1(f"{repo_type}/{repo_id}\n{listing}".encode()).hexdigest()
    return Repo(repo_id=repo_id, repo_type=repo_type, files=files, sha=sha, card_data=_card_data(files))


class RepoStore:
    """Repos under a hubsim root, scanned on first use (hashing a 300 MB repo takes ~1 s) and then cached."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"hubsim root {self.root} is not a directory (build it: python -m tests.hubsim build)")
        self._repos: dict[tuple[str, str], Repo] = {}
        self._lock = threading.Lock()

    def repo(self, kind: str, repo_id: str) -> Repo | None:
        """kind is 'datasets' or 'models' (as in URLs); None when there is no such repo."""
        if kind not in REPO_TYPES or repo_id.count("/") != 1 or ".." in repo_id:
            return None
        with self._lock:
            key = (kind, repo_id)
            if key not in self._repos:
                repo_dir = self.root / kind / repo_id
                if not repo_dir.is_dir():
                    return None
                self._repos[key] = load_repo(repo_dir, repo_id, REPO_TYPES[kind])
            return self._repos[key]

    def move_main(self, kind: str, repo_id: str, repo_dir: str | Path) -> Repo:
        """Point the repo's `main` at the files under `repo_dir` (its next commit; the commits before stay readable
        by sha) and return it. For a server of a test's own: the others share the session's."""
        before = self.repo(kind, repo_id)
        if before is None:
            raise FileNotFoundError(f"no repo {kind}/{repo_id} under {self.root}")
        after = load_repo(Path(repo_dir), repo_id, REPO_TYPES[kind])
        after.earlier = {**before.earlier, before.sha: before}
        with self._lock:
            self._repos[(kind, repo_id)] = after
        return after

    def list_repos(self) -> list[tuple[str, str]]:
        found = []
        for kind in REPO_TYPES:
            for repo_dir in sorted((self.root / kind).glob("*/*")):
                if repo_dir.is_dir():
                    found.append((kind, repo_dir.relative_to(self.root / kind).as_posix()))
        return found

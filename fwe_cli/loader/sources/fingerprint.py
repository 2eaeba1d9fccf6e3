"""How the files a source read then differ from those it reads now: what a resume state or a resumed bootstrap is
checked by (a file rewritten since is refused by name rather than read from a stale offset).

A source's fingerprint is one entry per file (path and size and modification time, or a manifest's sha256), taken
once as it opens. A bootstrap's resume records it whole (`files_changed`); a loader's resume state, taken at every
step, records a `summary` of each node's (`tree_summary`) whose size does not grow with the files: their count and
the digests of at most GROUPS runs of consecutive entries (`check_tree` names the file when a run is one file, else
the run).
"""

from __future__ import annotations

import hashlib

import orjson

from fwe_cli.errors import ConfigError

GROUPS = 32


def files_changed(saved: list[dict] | None, now: list[dict] | None, paths: list[str], where: str,
                  may_grow: bool = False) -> str | None:
    """How the files `now` (a source's fingerprint: path and size and modification time, or the manifest's sha256)
    differ from `saved`, in a few words naming the first that differs; None when they are the same. `paths`: the
    files as listed (a state of fwe <= 0.1 recorded paths only); `may_grow`: files added after them are fine (a
    bootstrap grown since, read in stream order)."""
    if saved is None or now is None:
        return None
    keys = set().union(*saved) if saved else set()
    if keys == {"path"}:
        now = [{"path": path} for path in paths]
    else:
        now = [{k: entry.get(k) for k in keys} for entry in now]
    current = now[:len(saved)] if may_grow else now
    for old, new in zip(saved, current):
        if old != new:
            return f"{_show(old)} then, {_show(new)} now"
    if len(current) != len(saved):
        return f"{len(saved)} files of {where} then, {len(now)} now"
    return None


def summary(entries: list[dict] | None) -> dict | None:
    """A fingerprint in a few hundred bytes: {"count", "groups": the digest of each run of entries}."""
    if entries is None:
        return None
    return {"count": len(entries), "groups": [_digest(run) for run in _runs(entries, len(entries))]}


def summary_changed(saved: dict | None, now: list[dict] | None, where: str, may_grow: bool = False) -> str | None:
    """How the files `now` differ from those a `summary` recorded, in a few words naming the file (or the run of
    files) that differs; None when they are the same. `may_grow`: files added after them are fine."""
    if saved is None or now is None:
        return None
    count = saved.get("count", 0)
    current = now[:count] if may_grow else now
    if len(current) != count:
        return f"{count} files of {where} then, {len(now)} now"
    for run, digest in zip(_runs(current, count), saved.get("groups") or []):
        if _digest(run) != digest:
            names = [str(entry.get("path") or entry.get("name")) for entry in run]
            named = names[0] if len(names) == 1 else f"one of {len(names)} files from {names[0]} to {names[-1]}"
            return f"{named} differs in size, modification time or version (ETag)"
    return None


def tree_summary(source) -> dict:
    """{"files": the `summary` of a source's fingerprint, "children": each child's} for a whole source tree."""
    node: dict = {"files": summary(source.fingerprint())}
    if source.children:
        node["children"] = [tree_summary(child) for child in source.children]
    return node


def check_tree(source, saved: dict | None, may_grow: bool = False) -> None:
    """ConfigError (one line, naming the file that differs) unless every node's files are those a `tree_summary`
    recorded (or, below a source that `grows`, those and more after them)."""
    if saved is None:
        return
    may_grow = may_grow or source.grows
    change = summary_changed(saved.get("files"), source.fingerprint(), source.location(source.spec), may_grow)
    if change is not None:
        raise ConfigError(f"the resume state was saved over other data ({change}): resume over the same data, or "
                          "start without the state")
    for child, child_saved in zip(source.children, saved.get("children") or []):
        check_tree(child, child_saved, may_grow)


def _runs(entries: list[dict], count: int) -> list[list[dict]]:
    size = max(1, -(-count // GROUPS))
    return [entries[i:i + size] for i in range(0, len(entries), size)]


def _digest(run: list[dict]) -> str:
    return hashlib.blake2b(orjson.dumps(run, option=orjson.OPT_SORT_KEYS), digest_size=8).hexdigest()


def _show(entry: dict) -> str:
    """A fingerprint entry in a few words: its name, then what was recorded of it."""
    name = entry.get("path") or entry.get("name")
    rest = ", ".join(f"{k} {v}" for k, v in entry.items() if k not in ("path", "name"))
    return f"{name} ({rest})" if rest else str(name)

"""How the files a source read then differ from those it reads now: what a resume state or a resumed bootstrap is
checked by (a file rewritten since is refused by name rather than read from a stale offset)."""

from __future__ import annotations


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


def _show(entry: dict) -> str:
    """A fingerprint entry in a few words: its name, then what was recorded of it."""
    name = entry.get("path") or entry.get("name")
    rest = ", ".join(f"{k} {v}" for k, v in entry.items() if k not in ("path", "name"))
    return f"{name} ({rest})" if rest else str(name)

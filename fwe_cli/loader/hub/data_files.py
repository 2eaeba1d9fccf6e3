"""Which files of a Hub dataset repository a config's split reads, as `datasets` decides it: the dataset card's
`configs:` (config_name -> data_files: each split's path patterns, such as `sample/10BT/*`), globbed against the
repository's file names, hidden files skipped, in sorted path order. hub.listing uses it on the names the Hub lists.
"""

from __future__ import annotations

import re

from fwe_cli.errors import SourceError


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

"""Where a path that may not exist yet would land: its nearest existing folder (free disk is measured there, a lock
creates the folders below it and removes them again when it wrote nothing)."""

from __future__ import annotations

import os


def nearest_existing(path: str) -> tuple[str, list[str]]:
    """(`path` or its nearest ancestor that exists, the absolute paths below that one down to `path` that do not,
    deepest first). `path` is made absolute first; the root always exists."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.exists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    return path, missing

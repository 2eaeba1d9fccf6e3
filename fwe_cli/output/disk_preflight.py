"""Free disk space checked before a run writes: what is left to write plus a margin, on the filesystem the output
goes to (measured at its nearest existing folder when the output's folder does not exist yet)."""

from __future__ import annotations

import psutil

from fwe_cli.errors import DiskSpaceError
from fwe_cli.output.nearest_existing import nearest_existing

# Free space needed beyond the bytes still to write: the last record overshoots the target by up to ~120 KB,
# the manifest is a few KB, and a filesystem at 100% misbehaves, so keep 64 MiB + 2 % spare.
MARGIN_BYTES = 64 * 2**20
MARGIN_FRACTION = 0.02


def preflight_disk(directory: str, remaining_bytes: int, what: str, size_flag: str) -> dict:
    """{free_bytes, needed_bytes, checked_path}; DiskSpaceError unless the filesystem of `directory` has room for
    `remaining_bytes` plus the margin, naming `what` is written ('the bootstrap') and the flag that sizes it."""
    probe, _ = nearest_existing(directory)
    remaining = max(0, remaining_bytes)
    need = remaining + MARGIN_BYTES + int(MARGIN_FRACTION * remaining)
    free = psutil.disk_usage(probe).free
    if free < need:
        raise DiskSpaceError(
            f"not enough disk space for {what} at {directory}: {free / 1e9:.2f} GB free on {probe}, "
            f"{need / 1e9:.2f} GB needed ({remaining / 1e9:.2f} GB still to write + margin); free space, "
            f"choose another --out, or lower {size_flag}"
        )
    return {"free_bytes": free, "needed_bytes": need, "checked_path": probe}

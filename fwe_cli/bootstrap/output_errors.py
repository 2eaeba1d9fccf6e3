"""The one translation of an OSError on a bootstrap output into fwe's errors.

Every place that creates, writes, renames, syncs or removes a file of the output does it inside
`on_output(operation, path)`, so whatever the OS says (permission denied, read-only filesystem, not a directory,
is a directory, name too long, no space left) reaches the user as one line naming the operation and the path,
with the output's exit code (8), or the disk-space one (7) for a full disk or quota. An OSError that escapes
the copy loop without passing through here therefore came from the source (see fwe_cli/bootstrap/run.py).
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from typing import Iterator

from fwe_cli.errors import DiskSpaceError, OutputError, os_error_line

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def output_error(operation: str, path: str, exc: OSError) -> OutputError:
    """The error an OSError on the output becomes; a full disk is resumable once space is freed, and says so."""
    line = os_error_line(operation, path, exc)
    if exc.errno in _DISK_FULL:
        return DiskSpaceError(f"{line}: free space and re-run the same command to resume from the last checkpoint")
    return OutputError(line)


@contextmanager
def on_output(operation: str, path: str) -> Iterator[None]:
    """Run the block; an OSError in it becomes `output_error(operation, path, exc)`.

    Raised `from None`: the line already says what the OSError says, and a cause would be appended to it again
    (fwe_cli/cli/errors.py one_line); the OSError stays reachable as __context__."""
    try:
        yield
    except OSError as exc:
        raise output_error(operation, path, exc) from None


def remove_output(path: str) -> None:
    """Delete an output file fwe wrote (gone already is fine); an OSError as the one-line output error."""
    with on_output("remove", path):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

"""The one translation of an OSError on a resumable output (a bootstrap, a token directory) into fwe's errors.

Every place that creates, writes, renames, syncs or removes a file of the output does it inside
`on_output(operation, path)`, so whatever the OS says (permission denied, read-only filesystem, not a directory,
is a directory, name too long, no space left) reaches the user as one line naming the operation and the path,
with the output's exit code (8), or the disk-space one (7) for a full disk or quota. An OSError that escapes a
run's copy loop without passing through here therefore came from the source (see fwe_cli/bootstrap/run.py).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from fwe_cli.artifacts import output_error
from fwe_cli.errors import OutputError

RESUME_WHEN_FREED = "free space and re-run the same command to resume from the last checkpoint"


def resumable_output_error(operation: str, path: str, exc: OSError) -> OutputError:
    """artifacts.output_error for an output a re-run resumes: a full disk says how to go on once space is freed."""
    return output_error(operation, path, exc, when_full=RESUME_WHEN_FREED)


@contextmanager
def on_output(operation: str, path: str) -> Iterator[None]:
    """Run the block; an OSError in it becomes `resumable_output_error(operation, path, exc)`.

    Raised `from None`: the line already says what the OSError says, and a cause would be appended to it again
    (fwe_cli/cli/exit_codes.py one_line); the OSError stays reachable as __context__."""
    try:
        yield
    except OSError as exc:
        raise resumable_output_error(operation, path, exc) from None


def remove_output(path: str) -> None:
    """Delete an output file fwe wrote (gone already is fine); an OSError as the one-line output error."""
    with on_output("remove", path):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

"""Fault injection for the crash-safety tests of `fwe bootstrap` and `fwe tokenize`; inert unless its variables are
set.

- FWE_TEST_CRASH_AT=POINT:N  kill this process with SIGKILL the N-th time it reaches POINT. Points, in `fwe bootstrap`
  (fwe_cli/bootstrap/run.py, part_writer.py):
    record        just after a record was handed to the part writer (maybe still in a buffer)
    part-fsynced  a part is complete and fsynced under its temporary name, not yet renamed
    part-renamed  a part was renamed to its final name; the manifest does not list it yet
    manifest-tmp  a new manifest is written and fsynced under its temporary name, not yet renamed
  and in `fwe tokenize` (and `fwe bootstrap --tokenize`), fwe_cli/tokens/run.py:
    tokens-batch   a batch of documents' tokens was handed to the shard being written (not yet a whole shard)
    shard-fsynced  a shard and its index are complete and fsynced under temporary names, not yet renamed
    shard-renamed  a shard and its index were renamed to their final names; the manifest does not list them yet
    (manifest-tmp as above)
- FWE_TEST_SIGINT_AT=POINT:N  send this process SIGINT (Ctrl-C) the N-th time it reaches POINT: an interrupt at a
  known moment, so a test of Ctrl-C never races the run's end.
- FWE_TEST_ENOSPC_AFTER_BYTES=N  bootstrap part-file writes fail with ENOSPC ("No space left on device") once N bytes
  have been written by this process; the write that crosses N first writes what fits, as a full disk does.
- FWE_TEST_WRITE_ERRNO=NAME  with FWE_TEST_ENOSPC_AFTER_BYTES, fail with this errno instead (EROFS, EIO, EACCES...):
  an output that becomes unwritable mid-run, reproducible without root or a real read-only mount.

Run a crash by hand:  FWE_TEST_CRASH_AT=part-renamed:1 fwe bootstrap --source synthetic --gb 0.01 --file-mb 2 --out /tmp/b
"""

from __future__ import annotations

import errno
import os
import signal
from typing import Mapping

CRASH_VAR = "FWE_TEST_CRASH_AT"
SIGINT_VAR = "FWE_TEST_SIGINT_AT"
ENOSPC_VAR = "FWE_TEST_ENOSPC_AFTER_BYTES"
ERRNO_VAR = "FWE_TEST_WRITE_ERRNO"
POINTS = ("record", "part-fsynced", "part-renamed", "manifest-tmp", "tokens-batch", "shard-fsynced", "shard-renamed")


class Faults:
    """The faults configured for this process (none by default)."""

    def __init__(self, crash_point: str | None = None, crash_count: int = 1, enospc_after: int | None = None,
                 sigint_point: str | None = None, sigint_count: int = 1, write_errno: int = errno.ENOSPC):
        for var, point in ((CRASH_VAR, crash_point), (SIGINT_VAR, sigint_point)):
            if point is not None and point not in POINTS:
                raise ValueError(f"{var}: unknown point {point!r} (known: {', '.join(POINTS)})")
        self.crash_point = crash_point
        self.crash_count = crash_count
        self.sigint_point = sigint_point
        self.sigint_count = sigint_count
        self.enospc_after = enospc_after
        self.write_errno = write_errno
        self.active = crash_point is not None or enospc_after is not None or sigint_point is not None
        self._seen = 0
        self._seen_sigint = 0
        self._written = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Faults":
        env = os.environ if env is None else env
        crash, crash_count = _point(env.get(CRASH_VAR))
        sigint, sigint_count = _point(env.get(SIGINT_VAR))
        enospc = int(env[ENOSPC_VAR]) if env.get(ENOSPC_VAR) else None
        name = env.get(ERRNO_VAR) or "ENOSPC"
        if not hasattr(errno, name):
            raise ValueError(f"{ERRNO_VAR}: unknown errno name {name!r}")
        return cls(crash, crash_count, enospc, sigint, sigint_count, getattr(errno, name))

    def reached(self, point: str) -> None:
        if point == self.crash_point:
            self._seen += 1
            if self._seen == self.crash_count:
                os.kill(os.getpid(), signal.SIGKILL)
        if point == self.sigint_point:
            self._seen_sigint += 1
            if self._seen_sigint == self.sigint_count:
                os.kill(os.getpid(), signal.SIGINT)

    def allowed_write(self, size: int) -> int:
        """How many of `size` bytes may be written before the injected disk-full (all of them when none)."""
        if self.enospc_after is None:
            return size
        room = max(0, self.enospc_after - self._written)
        return min(size, room)

    def wrote(self, size: int) -> None:
        self._written += size

    def write_error(self) -> OSError:
        """The OSError of the injected failing write: ENOSPC, or FWE_TEST_WRITE_ERRNO's, worded as the OS words it
        (the user's message must read as a real failure's does)."""
        return OSError(self.write_errno, os.strerror(self.write_errno))


def _point(raw: str | None) -> tuple[str | None, int]:
    """'POINT:N' -> (POINT, N); unset -> (None, 1)."""
    if not raw:
        return None, 1
    point, _, count = raw.partition(":")
    return point, int(count or 1)


NO_FAULTS = Faults()

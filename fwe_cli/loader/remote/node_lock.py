"""One process at a time per Hugging Face cache: the ranks of a node (or of a job, where the cache is on a shared
filesystem whose locks work) ask the Hub for what they all need once, and the others read the answer from the cache.

    with node_lock(path, timeout_s=60, what="another rank's Hub listing", set_stage=set_stage):
        ... look in the cache again (a rank that held the lock may have just written it), else ask the Hub

`node_lock` takes an exclusive flock(2) on `path`, waiting at most `timeout_s`; while it waits, `set_stage` names the
lock ("waiting for another rank's Hub listing (lock PATH)"), so a loader timeout says what the producer waited on.
The kernel releases a flock when its holder's process ends, kill -9 included, so a holder that died never blocks
anyone; the lock file holds the holder's PID, which the timeout's message names, and stays (an unlinked lock file
could be locked by two processes at once). A cache where the lock file cannot be made, or a filesystem without
flock, runs without it: each process then asks the Hub itself, as it would alone.

`process_started_at()` is when this process started (wall clock): an answer another process wrote after that is as
fresh as one this process would get by asking now.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from fwe_cli.errors import LoaderTimeout

_POLL_S = (0.005, 0.05)  # first and longest pause between two tries of the lock
_IMPORTED_AT = time.time()


@contextmanager
def node_lock(path: str, timeout_s: float, what: str,
              set_stage: Callable[[str], None] = lambda stage: None) -> Iterator[bool]:
    """Hold the flock on `path` for the block (yields True), or run the block without it when this cache cannot be
    locked (yields False). LoaderTimeout naming `what`, the lock and its holder after `timeout_s` of waiting."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a read-only or full cache: nothing to share through it anyway
        yield False
        return
    try:
        if not _acquire(fd, path, timeout_s, what, set_stage):
            yield False
            return
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the PID is only named in another process's timeout message
        yield True
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _acquire(fd: int, path: str, timeout_s: float, what: str, set_stage: Callable[[str], None]) -> bool:
    """True once locked; False when this filesystem cannot flock; LoaderTimeout after timeout_s."""
    deadline, pause, stage = time.monotonic() + timeout_s, _POLL_S[0], None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:  # ENOLCK, EOPNOTSUPP: a filesystem without locks
            return False
        if stage is None:
            stage = f"waiting for {what} (lock {path})"
            set_stage(stage)
        left = deadline - time.monotonic()
        if left <= 0:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise LoaderTimeout(f"waited {timeout_s:g} s for {what} (lock {path}, held by pid {holder})", stage=stage)
        time.sleep(min(pause, left))  # flock has no timeout of its own: poll, a few ms apart at first
        pause = min(pause * 2, _POLL_S[1])


def process_started_at() -> float:
    """Wall-clock time this process started (Linux: from /proc; elsewhere: when fwe's loader was imported)."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks after boot
        return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED_AT

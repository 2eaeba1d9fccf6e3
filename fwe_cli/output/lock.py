"""The advisory lock that keeps two runs (`fwe bootstrap`, `fwe tokenize`) off one output.

Two runs on the same --out would both append to the same `.partial` files and both replace the manifest, so the
output would hold neither run's data. A run therefore holds an exclusive flock(2) on its layout's `lock_path`
(a bootstrap's `OUT/.fwe-bootstrap.lock` or `OUT.jsonl.lock`, a token directory's `OUT/.fwe-tokens.lock`) from
before it reads the manifest until it returns. The kernel drops the lock when the process dies, kill -9 included,
so a lock is never stale; a lock *file* left by a killed run is harmless and reused. The file holds the holder's
PID, which a refused run names.

The holder deletes the file before it lets go, so a finished output keeps no lock file. A run that opened the
file just before the delete could then lock an inode no longer reachable by name, which guards nothing: after
locking, a run checks that the path still names its inode, and starts over when it does not.

A run may instead wait for the holder to let go (`wait_s`): the tasks of a split `fwe tokenize` take the output's
lock one after another to see whether they are the last one to finish (fwe_cli/tokens/merge.py).
"""

from __future__ import annotations

import fcntl
import os
import time

from fwe_cli.errors import OutputError
from fwe_cli.output.kind import OutputLayout
from fwe_cli.output.nearest_existing import nearest_existing
from fwe_cli.output.os_errors import on_output, resumable_output_error

_ATTEMPTS = 10  # each retry means another run released the lock between our open and our flock: never many
_POLL_S = 0.05  # how often a waiting run tries again


class OutputLock:
    """`with OutputLock(layout):` holds the output's lock (creating its directory), or raises OutputError at once
    naming the PID of the run that holds it."""

    def __init__(self, layout: OutputLayout, wait_s: float = 0.0):
        """`layout`: the output's paths; a refused run names its kind's command as the holder. `wait_s`: how long
        to wait for the holder to let go before refusing (0: refuse at once)."""
        self.wait_s = wait_s
        self._deadline = 0.0
        self.layout = layout
        self.command = layout.kind.command
        self.path = layout.lock_path
        self._fd = -1
        self._created: list[str] = []  # directories this run created, deepest first: removed again if left empty

    def __enter__(self) -> "OutputLock":
        self._deadline = time.monotonic() + self.wait_s
        attempts = 0
        while attempts < _ATTEMPTS or time.monotonic() < self._deadline:
            attempts += 1
            self._make_directory()
            with on_output("create lock file", self.path):
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                except FileNotFoundError:  # a run that wrote nothing removed the directory just now
                    continue
            if self._lock(fd):
                self._fd = fd
                with on_output("write lock file", self.path):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return self
            os.close(fd)
        raise OutputError(f"cannot lock {self.path}: other runs kept taking and releasing it")

    def _make_directory(self) -> None:
        _, missing = nearest_existing(self.layout.directory)
        with on_output("create directory", self.layout.directory):
            os.makedirs(self.layout.directory, exist_ok=True)
        self._created = missing or self._created

    def _lock(self, fd: int) -> bool:
        """True when `fd` is locked and still the file at self.path; False to try again; OutputError if held."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() < self._deadline:
                time.sleep(_POLL_S)
                return False
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise OutputError(f"{self.layout.out} is being written by another {self.command} (pid "
                              f"{holder or 'unknown'}, lock {self.path}): wait for it to end, or stop it and re-run "
                              "to resume") from None
        except OSError as exc:  # e.g. a filesystem without locks (ENOLCK)
            os.close(fd)
            raise resumable_output_error("lock", self.path, exc) from None
        try:
            mine, named = os.fstat(fd), os.stat(self.path)
        except FileNotFoundError:
            return False
        return (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino)

    def __exit__(self, *exc) -> None:
        """Delete the lock file, then unlock (closing); remove directories this run created if it left them empty."""
        if self._fd < 0:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass  # a lock file left behind is harmless: the next run locks and reuses it
        os.close(self._fd)
        self._fd = -1
        for directory in self._created:
            try:
                os.rmdir(directory)  # only ever removes an empty directory
            except OSError:
                break

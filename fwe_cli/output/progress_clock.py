"""The clock of a long run's progress reports (bootstrap, tokenize): elapsed time, and at most one report every
EVERY_S seconds, so a fast copy does not spend its time redrawing a bar."""

from __future__ import annotations

import time

EVERY_S = 0.5


class ProgressClock:
    """Started at construction; `due` says whether a report is due and how long the run has taken."""

    def __init__(self) -> None:
        self.t0 = self._last = time.perf_counter()

    def due(self, force: bool = False) -> float | None:
        """Seconds since the start when a report is due now (always with `force`), else None."""
        now = time.perf_counter()
        if not force and now - self._last < EVERY_S:
            return None
        self._last = now
        return now - self.t0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

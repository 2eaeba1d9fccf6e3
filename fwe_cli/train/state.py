"""What every trainer adapter shares: one numbering of its readers, and one way to hand out rows.

A reader is what reads its own share of the data (sources.deal): a rank, or one of its DataLoader or Grain workers.
Worker w of n on a rank that is reader `rem` of `mod` is reader rem·n + w of mod·n (`worker_reader`): a rank's
workers hold adjacent stretches of the rank's share, together exactly the rank's, whatever n.

Every adapter saves the one state the loader has (fwe_cli.loader.state.model.State, as JSON text under "fwe"), with
its rank's workers, the rows of the next batch already handed out (a trainer fed rows: HF causal-LM samples, Grain's
rows) and its mode. `Rows` hands out a loader's batches row by row and says where it is in those terms.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from fwe_cli.errors import ConfigError
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.state.model import State


def worker_reader(shard: Shard, workers: int, worker: int) -> Shard:
    """The reader that worker `worker` of `workers` is on the rank that is reader `shard` (no workers: the rank)."""
    if not workers:
        return shard
    if not 0 <= worker < workers:
        raise ConfigError(f"worker {worker} of {workers}: a worker's number must be from 0 to {workers - 1}")
    return Shard(shard.mod * workers, shard.rem * workers + worker)


def started(config, state: State | list | None) -> tuple:
    """(the loader config, the state) a pass starts from: a fresh state taken before any loader ran names only the
    epoch its pass begins at."""
    if isinstance(state, State) and state.matching is None:
        return config.replace(epoch=state.epoch), None
    return config, state


class Rows:
    """A loader's batches handed out one row at a time (`split` makes a batch's rows), from `skip` rows into its first
    batch; `state()` is (the loader's state after the last batch handed out whole, rows of the next one handed out)."""

    def __init__(self, loader, split: Callable[[Any], list], skip: int = 0):
        self._loader, self._split = loader, split
        self._before: State = loader.state()
        self._taken, self._height = skip, None

    def __iter__(self) -> Iterator[Any]:
        skip = self._taken
        for batch in self._loader:
            rows = self._split(batch)
            self._height = len(rows)
            for taken in range(skip, len(rows)):
                self._taken = taken + 1
                yield rows[taken]
            skip = 0
            self._before, self._taken, self._height = self._loader.state(), 0, None
        self._before = self._loader.state()  # (its stream ended: done)

    def state(self) -> tuple[State, int]:
        if self._taken and self._taken == self._height:  # a batch handed out whole: the loader's state after it
            return self._loader.state(), 0
        return self._before, self._taken

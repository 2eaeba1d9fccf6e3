"""What every trainer adapter saves, and who its readers are: one numbering, one envelope, one way to hand out rows.

A reader is what reads its own share of the data (sources.deal): a rank, or one of its DataLoader or Grain workers.
Worker w of n on a rank that is reader `rem` of `mod` is reader rem·n + w of mod·n (`worker_reader`): a rank's
workers hold adjacent stretches of the rank's share, together exactly the rank's, whatever n.

Every adapter's state is a `ReaderState`: the fwe loader state of one reader (FineWebLoader.state_dict: after the
last batch it took whole; None: its pass's start), the rows of the next batch already handed out (a trainer fed rows:
HF causal-LM samples, Grain's rows), the pass (epoch) it belongs to, and who saved it. It travels as JSON text under
"fwe": torchdata diffs and rebuilds a worker's state dict at every step and Grain asks for one with every element, so
one opaque string costs them nothing to compare or copy. `Rows` hands out a loader's batches row by row and says
where it is in those terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import orjson

from fwe_cli.errors import ConfigError
from fwe_cli.loader.shard import Shard

KIND = "fwe_reader"
VERSION = 1


def worker_reader(shard: Shard, workers: int, worker: int) -> Shard:
    """The reader that worker `worker` of `workers` is on the rank that is reader `shard` (no workers: the rank)."""
    if not workers:
        return shard
    if not 0 <= worker < workers:
        raise ConfigError(f"worker {worker} of {workers}: a worker's number must be from 0 to {workers - 1}")
    return Shard(shard.mod * workers, shard.rem * workers + worker)


@dataclass(frozen=True)
class ReaderState:
    """Where one reader is (see the module docstring)."""

    reader: Shard
    """Who saved it: reader `rem` of `mod`."""
    workers: int = 0
    """The workers of its rank (0: the rank read itself)."""
    epoch: int = 0
    """The pass it belongs to (the shuffle's epoch of a trainer's set_epoch)."""
    loader: dict | None = None
    """The loader's state after the last batch taken whole (None: the pass's start)."""
    rows: int = 0
    """Rows of the next batch already handed out."""
    samples: bool = False
    """Saved by an adapter that hands out rows."""

    def text(self) -> str:
        return orjson.dumps({"kind": KIND, "version": VERSION, "reader": [self.reader.mod, self.reader.rem],
                             "workers": self.workers, "epoch": self.epoch, "loader": self.loader, "rows": self.rows,
                             "samples": self.samples}).decode()

    def state(self) -> dict[str, str]:
        """As an adapter's state dict: {"fwe": its text}."""
        return {"fwe": self.text()}

    @classmethod
    def parse(cls, state: Any, what: str) -> "ReaderState":
        """The ReaderState of an adapter's state dict ({"fwe": text}); ConfigError naming `what` was expected."""
        text = state.get("fwe") if isinstance(state, dict) else None
        try:
            data = orjson.loads(text) if isinstance(text, str) else None
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise ConfigError(f"not a {what} state (no fwe reader state under 'fwe'): give what its state_dict() "
                              "returned")
        if data.get("version") != VERSION:
            raise ConfigError(f"a {what} state of version {data.get('version')!r}; this fwe reads version {VERSION}")
        try:
            mod, rem = data["reader"]
            return cls(Shard(int(mod), int(rem)), int(data["workers"]), int(data["epoch"]), data["loader"],
                       int(data["rows"]), bool(data["samples"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"a {what} state that does not fit ({exc})") from None

    def check(self, reader: Shard, workers: int, samples: bool, where: Callable[[Shard, int], str]) -> None:
        """ConfigError, naming both, unless it was saved by the same reader with as many workers, in the same mode."""
        if (self.reader, self.workers) != (reader, workers):
            raise ConfigError(f"the state was saved by {where(self.reader, self.workers)}, this is "
                              f"{where(reader, workers)}: resume with the world size and workers it was saved with, "
                              "deal every reader's state of that world anew (load_world), or start without the state")
        if self.samples != samples:
            raise ConfigError(f"the state was saved with samples={self.samples}, this has samples={samples}: resume "
                              "in the same mode")


def reader_states(states: Any) -> list[ReaderState]:
    """Every ReaderState found in `states` (adapters' state dicts, or torchdata's StatefulDataLoader state dicts that
    hold them for each worker, in a list of ranks): what a new world is dealt from."""
    found: list[ReaderState] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("fwe"), str):
                found.append(ReaderState.parse(value, "fwe reader"))
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(states)
    return found


class Rows:
    """A loader's batches handed out one row at a time (`split` makes a batch's rows), from `skip` rows into its first
    batch; `state()` is (the loader's state after the last batch handed out whole, rows of the next one handed out)."""

    def __init__(self, loader, split: Callable[[Any], list], start: dict | None = None, skip: int = 0):
        self._loader, self._split = loader, split
        self._before, self._taken, self._height = start, skip, None

    def __iter__(self) -> Iterator[Any]:
        skip = self._taken
        for batch in self._loader:
            rows = self._split(batch)
            self._height = len(rows)
            for taken in range(skip, len(rows)):
                self._taken = taken + 1
                yield rows[taken]
            skip = 0
            self._before, self._taken, self._height = self._loader.state_dict(), 0, None

    def state(self) -> tuple[dict | None, int]:
        if self._taken and self._taken == self._height:  # a batch handed out whole: the loader's state after it
            return self._loader.state_dict(), 0
        return self._before, self._taken

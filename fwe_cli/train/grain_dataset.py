"""fwe as a Grain dataset: a `grain.IterDataset` whose iterators checkpoint exactly through `get_state`/`set_state`,
also under `mp_prefetch` worker processes.

    ds = FineWebIterDataset(config)                     # elements: fwe's batches (rows=True: one row each)
    it = iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=12, per_worker_buffer_size=32)))
    state = it.get_state()                              # JSON-able; later, in another process: it.set_state(state)

fwe shards documents, not elements: `mp_prefetch` hands worker i of n the slice (i, None, n) and this dataset turns it
into the shard world × workers (document d is worker i's of rank r when d % (world·n) == r + world·i), so every
worker tokenizes and packs its own documents and none is read twice. An iterator's state is a fwe loader state (as
JSON text, so its shape and types never change) and the rows handed out since it, which a restart makes again and
drops: the loader's own state is taken every `state_every` batches, not with every element as Grain asks for one.
The loader starts on the first element, so states taken before it (Grain takes one in the main process for every
worker) read nothing. Batches are numpy arrays (or dicts of them), which Grain moves between processes through
shared memory.
"""

from __future__ import annotations

from typing import Any

import grain
import numpy as np
import orjson

from fwe_cli.errors import ConfigError, EndOfData
from fwe_cli.loader import FineWebLoader, LoaderConfig
from fwe_cli.loader.shard import Shard

# Batches between two takes of the loader's own state. Taking it can cost more than making a batch (it records each
# file the source reads as it is now: a stat per file, of hundreds for a large bootstrap), and Grain asks for a state
# with every element; a restart makes the batches since the last take again, a fraction of what starting costs.
STATE_EVERY = 16


def worker_shard(shard: Shard, sl: slice) -> Shard:
    """The documents of worker `sl.start` of `sl.step` within `shard`: Shard(mod·n, rem + mod·i). ConfigError for a
    slice that is not one worker's (Grain's slices are slice(i, None, n) with 0 <= i < n)."""
    start, step = sl.start or 0, sl.step or 1
    if sl.stop is not None or not 0 <= start < step:
        raise ConfigError(f"fwe splits documents among workers: a worker's slice must be slice(i, None, n) with "
                          f"0 <= i < n, got {sl}")
    return Shard(shard.mod * step, shard.rem + shard.mod * start)


def _row(batch: Any, i: int) -> Any:
    """Row `i` of a batch: of the array, or of each of the dict's arrays."""
    if isinstance(batch, dict):
        return {key: value[i] for key, value in batch.items()}
    return batch[i]


class FineWebIterDataset(grain.IterDataset):
    """fwe's batches of `config` (or, with `rows`, their rows, for Grain's own `.batch()`) as a Grain source; its
    iterators take the loader's own state every `state_every` batches (see STATE_EVERY)."""

    def __init__(self, config: LoaderConfig, rows: bool = False, state_every: int = STATE_EVERY):
        super().__init__()
        if not isinstance(config, LoaderConfig):
            raise ConfigError(f"FineWebIterDataset needs a LoaderConfig (fwe_cli.loader.resolve_config), got "
                              f"{config!r}")
        if config.as_torch:
            raise ConfigError("as_torch cannot be used with Grain: Grain moves numpy arrays between its processes; "
                              "turn them into tensors after the pipeline")
        if not isinstance(state_every, int) or state_every < 1:
            raise ConfigError(f"state_every must be a whole number of batches >= 1, got {state_every!r}")
        self.config = config
        self.rows = rows
        self.state_every = state_every

    def set_slice(self, sl: slice, sequential_slice: bool = False) -> None:
        """Grain's in-place slicing (mp_prefetch's worker i of n, on the worker's copy): read that worker's documents.
        `sequential_slice` changes nothing: fwe's workers are interleaved by document, which keeps each one's share
        even."""
        del sequential_slice
        self.config = self.config.replace(shard=worker_shard(self.config.shard, sl))

    def __iter__(self) -> "FineWebIterator":
        return FineWebIterator(self.config, self.rows, self.state_every)

    def __str__(self) -> str:
        return f"FineWebIterDataset(shard={self.config.shard.rem}/{self.config.shard.mod}, rows={self.rows})"


class FineWebIterator(grain.DatasetIterator):
    """The iterator of a FineWebIterDataset: a FineWebLoader started on the first element, from the loader state it
    holds (None: the stream's start), and the rows handed out since that state, which a restart makes again and
    drops; the state moves up to the loader's own every `state_every` batches."""

    _MUTATES_ELEMENT_SPEC = False

    def __init__(self, config: LoaderConfig, rows: bool = False, state_every: int = STATE_EVERY):
        super().__init__()
        self._config = config
        self._rows = rows
        self._every = state_every
        self._loader: FineWebLoader | None = None
        self._at: dict | None = None  # the loader state the rows are counted from (None: the start, not yet named)
        self._text: str | None = "null"  # it as JSON (None: not encoded yet)
        self._handed = 0  # rows handed out since it
        self._batch: Any = None  # the batch being handed out (rows: what of it is left from row `_row` on)
        self._row = 0
        self._since = 0  # batches handed out whole since `_at`

    def __next__(self) -> Any:
        self._assert_not_closed()
        if self._batch is None:
            self._fetch()
        height = self._config.batch_size
        if self._rows:
            element, self._row = _row(self._batch, self._row), self._row + 1
            self._handed += 1
        else:
            element, self._row = self._batch, height
            self._handed += height
        if self._row == height:  # handed out whole
            self._batch, self._row, self._since = None, 0, self._since + 1
            if self._since >= self._every:
                self._at, self._text, self._handed, self._since = self._loader.state_dict(), None, 0, 0
        return element

    def _fetch(self) -> None:
        if self._loader is None:  # (re)start at `_at` and pass over the rows handed out since
            self._loader = FineWebLoader(self._config, state=self._at)
            if self._at is None:  # the start, as a state that names this loader's settings and shard for a resume
                self._at, self._text = self._loader.state_dict(), None
            self._since, self._row = divmod(self._handed, self._config.batch_size)
            for _ in range(self._since):
                self._next_batch()
        self._batch = self._next_batch()

    def _next_batch(self) -> Any:
        try:
            return self._loader.next_batch()
        except EndOfData:
            raise StopIteration from None

    def get_state(self) -> dict[str, Any]:
        """{"loader": a fwe loader state as JSON text, "rows": the rows handed out since it}."""
        if self._text is None:
            self._text = orjson.dumps(self._at).decode()
        return {"loader": self._text, "rows": self._handed}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from `state` (a `get_state()`, from any process): the loader restarts on the next element.
        ConfigError, on that element, when the state was saved under other settings or by another worker layout
        (naming the setting: fwe's resume checks)."""
        if not isinstance(state, dict) or not isinstance(state.get("loader"), str) or not isinstance(
                state.get("rows"), (int, np.integer)) or state["rows"] < 0:
            raise ConfigError(f"not a FineWebIterator state ({{'loader': JSON text, 'rows': int}}): {state!r}")
        self._close_loader()
        self._at, self._text, self._handed = orjson.loads(state["loader"]), state["loader"], int(state["rows"])
        self._batch = None

    def close(self) -> None:
        """Stop the loader's threads. Safe to call twice."""
        super().close()
        self._close_loader()

    def _close_loader(self) -> None:
        if self._loader is not None:
            self._loader.close()
            self._loader = None

    def __str__(self) -> str:
        return f"FineWebIterator(shard={self._config.shard.rem}/{self._config.shard.mod}, rows={self._rows})"

"""fwe as a Grain dataset: a `grain.IterDataset` whose iterators checkpoint exactly through `get_state`/`set_state`,
also under `mp_prefetch` worker processes.

    ds = FineWebIterDataset(config)                     # elements: fwe's batches (rows=True: one row each)
    it = iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=12, per_worker_buffer_size=32)))
    state = it.get_state()                              # JSON-able; later, in another process: it.set_state(state)

fwe shards documents, not elements: `mp_prefetch` hands worker i of n the slice (i, None, n) and this dataset turns it
into the shard world × workers (document d is worker i's of rank r when d % (world·n) == r + world·i), so every
worker tokenizes and packs its own documents and none is read twice. An iterator's state is the fwe loader state of the batch
it last handed out (as JSON text, so its shape and types never change) and, with `rows`, how many of the next batch's
rows it has handed out; the loader starts on the first element, so states taken before it (Grain takes one in the main
process for every worker) read nothing. Batches are numpy arrays (or dicts of them), which Grain moves between
processes through shared memory.
"""

from __future__ import annotations

from typing import Any

import grain
import numpy as np
import orjson

from fwe_cli.errors import ConfigError, EndOfData
from fwe_cli.loader import FineWebLoader, LoaderConfig
from fwe_cli.loader.shard import Shard


def worker_shard(shard: Shard, sl: slice) -> Shard:
    """The documents of worker `sl.start` of `sl.step` within `shard`: Shard(mod·n, rem + mod·i). ConfigError for a
    slice that is not one worker's (Grain's slices are slice(i, None, n) with 0 <= i < n)."""
    start, step = sl.start or 0, sl.step or 1
    if sl.stop is not None or not 0 <= start < step:
        raise ConfigError(f"fwe splits documents among workers: a worker's slice must be slice(i, None, n) with "
                          f"0 <= i < n, got {sl}")
    return Shard(shard.mod * step, shard.rem + shard.mod * start)


def _rows_in(batch: Any) -> int:
    return len(batch["input"]) if isinstance(batch, dict) else len(batch)


def _row(batch: Any, i: int) -> Any:
    """Row `i` of a batch: of the array, or of each of the dict's arrays."""
    if isinstance(batch, dict):
        return {key: value[i] for key, value in batch.items()}
    return batch[i]


class FineWebIterDataset(grain.IterDataset):
    """fwe's batches of `config` (or, with `rows`, their rows, for Grain's own `.batch()`) as a Grain source."""

    def __init__(self, config: LoaderConfig, rows: bool = False):
        super().__init__()
        if not isinstance(config, LoaderConfig):
            raise ConfigError(f"FineWebIterDataset needs a LoaderConfig (fwe_cli.loader.resolve_config), got "
                              f"{config!r}")
        if config.as_torch:
            raise ConfigError("as_torch cannot be used with Grain: Grain moves numpy arrays between its processes; "
                              "turn them into tensors after the pipeline")
        self.config = config
        self.rows = rows

    def set_slice(self, sl: slice, sequential_slice: bool = False) -> None:
        """Grain's in-place slicing (mp_prefetch's worker i of n, on the worker's copy): read that worker's documents.
        `sequential_slice` changes nothing: fwe's workers are interleaved by document, which keeps each one's share
        even."""
        del sequential_slice
        self.config = self.config.replace(shard=worker_shard(self.config.shard, sl))

    def __iter__(self) -> "FineWebIterator":
        return FineWebIterator(self.config, self.rows)

    def __str__(self) -> str:
        return f"FineWebIterDataset(shard={self.config.shard.rem}/{self.config.shard.mod}, rows={self.rows})"


class FineWebIterator(grain.DatasetIterator):
    """The iterator of a FineWebIterDataset: a FineWebLoader started on the first element (from the state set, if
    any), and what of its latest batch is left to hand out."""

    _MUTATES_ELEMENT_SPEC = False

    def __init__(self, config: LoaderConfig, rows: bool = False):
        super().__init__()
        self._config = config
        self._rows = rows
        self._loader: FineWebLoader | None = None
        self._at: dict | None = None  # the loader state before the batch being handed out (None: the stream's start)
        self._row = 0  # rows of that batch handed out already
        self._batch: Any = None  # that batch, once fetched
        self._after: dict | None = None  # the loader state after it

    def __next__(self) -> Any:
        self._assert_not_closed()
        if self._batch is None:
            self._fetch()
        if not self._rows:
            batch, self._batch, self._at = self._batch, None, self._after
            return batch
        row = _row(self._batch, self._row)
        self._row += 1
        if self._row == _rows_in(self._batch):
            self._batch, self._row, self._at = None, 0, self._after
        return row

    def _fetch(self) -> None:
        if self._loader is None:
            self._loader = FineWebLoader(self._config, state=self._at)
        try:
            self._batch = self._loader.next_batch()
        except EndOfData:
            raise StopIteration from None
        self._after = self._loader.state_dict()

    def get_state(self) -> dict[str, Any]:
        """{"loader": the fwe state before the batch being handed out, as JSON text; "row": its rows handed out}."""
        return {"loader": orjson.dumps(self._at).decode(), "row": self._row}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from `state` (a `get_state()`, from any process): the loader restarts on the next element.
        ConfigError, on that element, when the state was saved under other settings or by another worker layout
        (naming the setting: fwe's resume checks)."""
        if not isinstance(state, dict) or not isinstance(state.get("loader"), str) or not isinstance(
                state.get("row"), (int, np.integer)):
            raise ConfigError(f"not a FineWebIterator state ({{'loader': JSON text, 'row': int}}): {state!r}")
        self._close_loader()
        self._at, self._row = orjson.loads(state["loader"]), int(state["row"])
        self._batch = self._after = None

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

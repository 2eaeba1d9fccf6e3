"""fwe as a Grain dataset: a `grain.IterDataset` whose iterators checkpoint exactly through `get_state`/`set_state`,
also under `mp_prefetch` worker processes.

    ds = FineWebIterDataset(config)                     # elements: fwe's batches (rows=True: one row each)
    it = iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=12, per_worker_buffer_size=32)))
    state = it.get_state()                              # JSON-able; later, in another process: it.set_state(state)

fwe deals its readers their data, not elements: `mp_prefetch` hands worker i of n the slice (i, None, n) and this
dataset makes that worker reader rank·n + i of world·n (train.state.worker_reader: a rank's workers read adjacent
stretches of its share), so every worker tokenizes and packs its own documents and none is read twice. An iterator's
state is the loader's (fwe_cli.loader.state.model.State) as JSON text (its shape and types never change): after the
last batch handed out whole, with the rows of the next one handed out since (train.state.Rows), taken with each
element as Grain asks. The loader starts on the first element, so states taken before it
(Grain takes one in the main process for every worker) read nothing. Batches are numpy arrays (or dicts of them),
which Grain moves between processes through shared memory.
"""

from __future__ import annotations

from typing import Any

import grain

from fwe_cli.errors import ConfigError, EndOfData
from fwe_cli.loader import FineWebLoader, LoaderConfig
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.state.model import State
from fwe_cli.train.state import Rows, started, worker_reader


def worker_shard(shard: Shard, sl: slice) -> Shard:
    """The reader worker `sl.start` of `sl.step` on the rank `shard` is (train.state.worker_reader). ConfigError for
    a slice that is not one worker's (Grain's slices are slice(i, None, n) with 0 <= i < n)."""
    start, step = sl.start or 0, sl.step or 1
    if sl.stop is not None or not 0 <= start < step:
        raise ConfigError(f"fwe splits documents among workers: a worker's slice must be slice(i, None, n) with "
                          f"0 <= i < n, got {sl}")
    return worker_reader(shard, step, start) if step > 1 else shard


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
        self.workers = 0  # mp_prefetch's workers, once sliced

    def set_slice(self, sl: slice, sequential_slice: bool = False) -> None:
        """Grain's in-place slicing (mp_prefetch's worker i of n, on the worker's copy): read that worker's documents.
        `sequential_slice` changes nothing: each worker reads its own stretch of the rank's share either way."""
        del sequential_slice
        self.config = self.config.replace(shard=worker_shard(self.config.shard, sl))
        self.workers = (sl.step or 1) if (sl.step or 1) > 1 else 0

    def __iter__(self) -> "FineWebIterator":
        return FineWebIterator(self.config, self.rows, self.workers)

    def __str__(self) -> str:
        return f"FineWebIterDataset(reader={self.config.shard.rem}/{self.config.shard.mod}, rows={self.rows})"


class FineWebIterator(grain.DatasetIterator):
    """The iterator of a FineWebIterDataset: a FineWebLoader started on the first element, from the state it holds
    (the stream's start, or a `set_state`), its batches (rows) handed out through train.state.Rows."""

    _MUTATES_ELEMENT_SPEC = False

    def __init__(self, config: LoaderConfig, rows: bool = False, workers: int = 0):
        super().__init__()
        self._config = config
        self._start = State(config.shard, workers=workers, samples=rows)  # where the next loader starts
        self._loader: FineWebLoader | None = None
        self._feed: Rows | None = None
        self._elements: Any = None

    def __next__(self) -> Any:
        self._assert_not_closed()
        if self._loader is None:
            start = self._start
            self._loader = FineWebLoader(*started(self._config, start))
            split = _rows if start.samples else (lambda batch: [batch])
            self._feed = Rows(self._loader, split, start.rows)
            self._elements = iter(self._feed)
        try:
            return next(self._elements)
        except EndOfData:
            raise StopIteration from None

    def get_state(self) -> dict[str, Any]:
        """{"fwe": the loader's State as JSON text, with this worker layout, rows handed out and mode}."""
        if self._feed is None:
            return self._start.envelope()
        loader, rows = self._feed.state()
        return loader.placed(self._start.workers, rows, self._start.samples).envelope()

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from `state` (a `get_state()`, from any process): the loader restarts on the next element.
        ConfigError when it was saved by another worker layout or mode (naming both), or under other settings
        (naming the setting, on that element: fwe's resume checks)."""
        saved = State.from_envelope(state, "FineWebIterator")
        saved.check_place(self._start.reader, self._start.workers, self._start.samples, _where)
        self._close_loader()
        self._start = saved

    def close(self) -> None:
        """Stop the loader's threads. Safe to call twice."""
        super().close()
        self._close_loader()

    def _close_loader(self) -> None:
        if self._loader is not None:
            self._loader.close()
        self._loader = self._feed = self._elements = None

    def __str__(self) -> str:
        reader = self._start.reader
        return f"FineWebIterator(reader={reader.rem}/{reader.mod}, rows={self._start.samples})"


def _rows(batch: Any) -> list:
    """A batch's rows: of the array, or of each of the dict's arrays."""
    height = len(next(iter(batch.values()))) if isinstance(batch, dict) else len(batch)
    return [_row(batch, i) for i in range(height)]


def _where(reader: Shard, workers: int) -> str:
    if not workers:
        return f"reader {reader.rem} of {reader.mod} (no mp_prefetch workers)"
    return f"worker {reader.rem % workers} of {workers} of rank {reader.rem // workers} of {reader.mod // workers}"

"""FineWebDataset: fwe's loader as a torch `IterableDataset` whose DataLoader workers are readers of their own, with a
state torchdata's `StatefulDataLoader` saves and restores in each worker.

    from torchdata.stateful_dataloader import StatefulDataLoader
    dataset = FineWebDataset(config)                      # batches as fwe forms them (an array, or a dict of arrays)
    loader = StatefulDataLoader(dataset, batch_size=None, num_workers=2)
    state = loader.state_dict()                           # every worker's place, with the checkpoint
    loader.load_state_dict(state)                         # each worker continues after its last batch taken

Worker w of n on the rank the config names is reader rank·n + w (train.state): each reads only its own stretch of
the data, the rank's workers together the rank's. With `samples=True` the rows come one at a time as HF causal-LM
models take them ({"input_ids", "labels"} = the same int64 row: the model shifts the labels itself; "position_ids"
too when the batch carries `positions`). A worker's state is the loader's (state.model.State, with its workers,
rows and mode), resumed by the worker of the same place; a state of another world size or num_workers is refused
naming both, and every reader's state of another world is dealt anew with `load_world`. A pass is the loader's
epoch: `set_epoch(e)` reaches the workers, persistent ones included (a shared value), and the passes after it read
epoch e (its shuffle's order); a pass resumed in its middle keeps its own. Each pass begins at once (its state is its
start before its first batch); one that ends leaves its state done (a worker restored from it ends at once, as
torchdata expects) until a pass of another epoch begins; one that fails leaves its last batch's state. Tokenizer
threads: unless the config sets them, the loader's budget (its cap, its node's share of cores) split among the
workers; the tokenizer is loaded (its fast backend proven) once, by the constructor, for the workers forked later
to inherit. Tensors are made and pinned in the main process (`as_torch`, DataLoader's `pin_memory`), never in a
worker (one that initialised CUDA after a fork would fail).
"""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing import context
from typing import Any, Iterator

import numpy as np

from fwe_cli.errors import ConfigError, FweError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.pipeline.encoding import effective_threads
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.state.model import FRESH, State, found_states
from fwe_cli.loader.tokenization.doc_tokenizer import UpgradingTokenizer, load_tokenizer
from fwe_cli.train.state import Rows, started, worker_reader

try:
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("fwe_cli.loader.FineWebDataset needs torch: pip install 'fwe[torch]'") from None

from fwe_cli.train.worker_wire import for_the_wire  # noqa: E402 (torch first, for the message above)

SAMPLE_KEYS = {"input": "input_ids", "positions": "position_ids"}
"""Sample mode: the batch keys a row carries, under the names HF models take (labels = input_ids, added apart)."""


class FineWebDataset(IterableDataset):
    """fwe's batches (or, with `samples`, their rows) of the config's reader, split among DataLoader workers."""

    def __init__(self, config: LoaderConfig, samples: bool = False):
        if not isinstance(config, LoaderConfig):
            raise ConfigError(f"FineWebDataset takes a LoaderConfig (resolve_config(...)), got {config!r}")
        if samples and config.labels:
            raise ConfigError("FineWebDataset(samples=True) yields HF causal-LM rows (labels = input_ids: the model "
                              "shifts them): leave labels off its config")
        self.config = config
        self.samples = samples
        self._epoch: Any = multiprocessing.get_context().Value("q", 0, lock=False)  # read by every worker's pass
        prepare_tokenizer(config)
        self._next: State | list | None = None  # what the next pass starts from (None: its epoch's start)
        self._ended: State | None = None  # the last pass's state, when it ended: done
        self._pass: _Pass | None = None  # the pass in progress (in this process)
        self._last: FineWebLoader | None = None  # the last pass's loader, closed, for its stats

    @property
    def epoch(self) -> int:
        return int(self._epoch.value)

    # -- where this copy runs ------------------------------------------------------------------------
    def _place(self) -> tuple[Shard, int]:
        """(this copy's reader, its rank's DataLoader workers: 0 in the main process)."""
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (0, 0)
        return worker_reader(self.config.shard, workers, worker), workers

    def _pass_config(self, reader: Shard, workers: int, epoch: int) -> LoaderConfig:
        """The loader config of a pass: its reader, its epoch, tokenizer threads, and no tensors made in a worker (its
        batches cross as bytes: worker_wire)."""
        changes: dict[str, Any] = {"shard": reader, "epoch": epoch}
        if workers:
            changes.update(tokenizer_threads=effective_threads(self.config, workers), as_torch=False)
        return self.config.replace(**changes)

    # -- the torch protocol ----------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """The passes after this one read epoch `epoch` (a resumed pass keeps the epoch it was saved in); the workers
        see it, persistent ones too."""
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ConfigError(f"set_epoch takes an epoch number >= 0, got {epoch!r}")
        self._epoch.value = epoch

    def __iter__(self) -> Iterator:
        """One pass, begun now (a DataLoader asks for it as a worker resets): a loader over this copy's reader, from
        the state loaded if any; its batches, or their rows."""
        reader, workers = self._place()
        start, self._next, self._ended = self._next, None, None
        epoch = self.epoch
        if isinstance(start, State):
            start.check_place(reader, workers, self.samples, _where)
            if start.status != FRESH or start.rows:  # a pass resumed in its middle (or ended) keeps its epoch
                epoch = start.epoch
        self._close_pass()
        config = self._pass_config(reader, workers, epoch)
        rows = start.rows if isinstance(start, State) else 0
        running = self._pass = _Pass(*started(config, start), rows, workers, self.samples, wire=workers > 0)
        return self._run(running)

    def _run(self, running: "_Pass") -> Iterator:
        try:
            yield from running
        finally:
            if self._pass is running and not sys.is_finalizing():  # (a newer pass is left alone; at exit, all)
                if running.ended:
                    self._ended = running.state()
                else:
                    self._next = running.state()
                self._close_pass()

    def state_dict(self) -> dict:
        """Where this copy is: after the last batch (row) it yielded; between passes, where the next one starts (the
        state it was given, the last good batch of a pass that failed, its epoch's start), or, after a pass that
        ended and before another epoch is set, that pass's state: done. JSON-able; `load_state_dict` in the copy of
        the same place continues from it."""
        if self._pass is not None:
            return self._pass.state().envelope()
        if isinstance(self._next, State):
            return self._next.envelope()
        if self._ended is not None and self._ended.epoch == self.epoch:
            return self._ended.envelope()
        reader, workers = self._place()
        return State(reader, self.epoch, workers=workers, samples=self.samples).envelope()

    def load_state_dict(self, state: dict) -> None:
        """The next pass continues from `state` (a `state_dict()` of the copy of this place): ConfigError, in one
        line naming both, for a state of the other mode, and as the pass begins, for one of another world size,
        num_workers, rank or worker."""
        saved = State.from_envelope(state, "FineWebDataset")
        if saved.samples != self.samples:
            raise ConfigError(f"the DataLoader state was saved with samples={saved.samples}, this dataset has "
                              f"samples={self.samples}: resume in the same mode")
        self._next, self._ended = saved, None

    def load_world(self, states: Any) -> None:
        """The next pass of every copy (this process's and every worker's) continues the readers of another world:
        `states` holds each of their states (the StatefulDataLoader state_dict of every old rank, or the datasets',
        in a list), and each reader of this world is dealt its share of what they left (state.elastic), in the epoch
        they were in. In sample mode the rows handed out of a batch in progress are read again (at most a batch per
        old reader)."""
        found = found_states(states)
        if not found:
            raise ConfigError("no FineWebDataset state in the states given to load_world: give every rank's "
                              "StatefulDataLoader state_dict() of the old world")
        stale = _steps_since_snapshot(states)
        if stale:
            raise ConfigError(f"a StatefulDataLoader state given to load_world was taken {stale} steps after its "
                              "workers' last snapshot (snapshot_every_n_steps > 1): their places are not known; take "
                              "the states with snapshot_every_n_steps=1 to change the world size, or resume them with "
                              "the world they were saved by")
        self._next, self._ended = sorted(found, key=lambda s: s.reader.rem), None

    def stats(self) -> dict | None:
        """The loader's stats (FineWebLoader.stats) of this copy's pass in progress, else of its last pass; None
        before its first."""
        loader = self._pass.loader if self._pass is not None else self._last
        return loader.stats() if loader is not None else None

    # -- internals -------------------------------------------------------------------------------------
    def _close_pass(self) -> None:
        running, self._pass = self._pass, None
        if running is not None:
            running.close()
            self._last = running.loader

    def __getstate__(self) -> dict:
        """A copy for a DataLoader worker process: the settings, the loaded state, no pass in progress; the epoch
        shared with the workers as they start (elsewhere, a copy of its value)."""
        state = dict(self.__dict__, _pass=None, _last=None)
        if context.get_spawning_popen() is None:
            state["_epoch"] = _Epoch(self.epoch)
        return state


class _Epoch:
    """The epoch of a copy made outside a worker's start (not shared)."""

    def __init__(self, value: int):
        self.value = value


class _Pass:
    """One pass of a copy: its loader (started as the pass begins), its batches or rows, and where it is."""

    def __init__(self, config: LoaderConfig, start: State | list | None, rows: int, workers: int, samples: bool,
                 wire: bool):
        self.workers, self.samples, self.wire = workers, samples, wire
        self.loader = FineWebLoader(config, state=start)
        self.rows = Rows(self.loader, sample_rows, rows) if samples else None
        self.ended = False

    def __iter__(self) -> Iterator:
        if self.rows is not None:
            yield from self.rows
        else:
            yield from map(for_the_wire, self.loader) if self.wire else self.loader
        self.ended = True

    def state(self) -> State:
        """Where the pass is: after its last batch (row) handed out; its start before its first; done at its end."""
        loader, rows = self.rows.state() if self.rows is not None else (self.loader.state(), 0)
        return loader.placed(self.workers, rows, self.samples)

    def close(self) -> None:
        self.loader.close()


def prepare_tokenizer(config: LoaderConfig) -> None:
    """Load the config's tokenizer in this process and wait for its fast backend's proof (tokenization.doc_tokenizer):
    DataLoader workers forked from here start with it, instead of each proving it again (every epoch, unless the
    workers persist) while encoding with the slow backend. A tokenizer named by the source (config.tokenizer None) is
    loaded by each worker; one that fails to load fails in the workers' loaders, as it would without this."""
    if config.tokenizer is None:
        return
    try:
        tokenizer = load_tokenizer(config.tokenizer, config.tokenizer_backend, not config.hub_cache)
    except FweError:  # the loaders meet it again, within their limits (a synthetic fallback included)
        return
    if isinstance(tokenizer, UpgradingTokenizer):
        tokenizer.wait_upgrade(config.loader_timeout)


def _steps_since_snapshot(states: Any) -> int:
    """The most steps any StatefulDataLoader state in `states` was taken after its workers' last snapshot (their
    states then lag behind the batches it delivered)."""
    if isinstance(states, dict):
        own = states.get("_steps_since_snapshot")
        return max([own if isinstance(own, int) else 0] + [_steps_since_snapshot(v) for v in states.values()])
    if isinstance(states, (list, tuple)):
        return max([0] + [_steps_since_snapshot(v) for v in states])
    return 0


def _where(reader: Shard, workers: int) -> str:
    if not workers:
        return f"rank {reader.rem} of world size {reader.mod}, no DataLoader workers"
    return (f"rank {reader.rem // workers} of world size {reader.mod // workers}, worker {reader.rem % workers} of "
            f"num_workers={workers}")


def sample_rows(batch: Any) -> list[dict]:
    """The rows of a batch (an int32 [B, T] array or tensor, or a dict of them) as HF causal-LM samples: int64
    `input_ids`, `labels` (the same row) and, when the batch has `positions`, `position_ids`."""
    columns = {SAMPLE_KEYS[key]: value for key, value in batch.items() if key in SAMPLE_KEYS} \
        if isinstance(batch, dict) else {"input_ids": batch}
    tensors = {name: _int64(value) for name, value in columns.items()}
    tensors["labels"] = tensors["input_ids"]
    return [{name: tensor[i] for name, tensor in tensors.items()} for i in range(len(tensors["input_ids"]))]


def _int64(value: Any) -> "torch.Tensor":
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.astype(np.int64))
    return value.to(torch.int64)

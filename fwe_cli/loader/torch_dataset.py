"""FineWebDataset: fwe's loader as a torch `IterableDataset`, sharded by rank x DataLoader worker, whose state a
torchdata `StatefulDataLoader` saves and restores in each worker.

    from torchdata.stateful_dataloader import StatefulDataLoader
    dataset = FineWebDataset(config)                      # batches as fwe forms them (an array, or a dict of arrays)
    loader = StatefulDataLoader(dataset, batch_size=None, num_workers=2)
    state = loader.state_dict()                           # every worker's position, with the checkpoint
    loader.load_state_dict(state)                         # each worker continues after its last batch taken

Worker w of N on the shard (mod, rem) of the config (the rank among the world size) reads the loader shard
(mod x N, rem x N + w): every worker its own documents, none twice in an epoch. With `samples=True` the rows come one
at a time as HF causal-LM models take them ({"input_ids", "labels"} = the same int64 row: the model shifts the labels
itself; "position_ids" too when the batch carries `positions`), for trainers that collate themselves. A worker's state
is its loader's `state_dict()` (in sample mode: the one before the batch in progress, and its rows taken), resumed by
the worker of the same place; a state saved with another world size or num_workers is refused naming both.
`set_epoch(e)`: the passes after it shuffle as pass e (shuffle_seed + e; without a shuffle every pass is the stream
in order). Tokenizer threads: unless the config sets them, the usable cores split among the workers; the tokenizer
is loaded (its fast backend proven) once, by the constructor, for the workers forked later to inherit.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from fwe_cli.errors import ConfigError, FweError
from fwe_cli.hostinfo import usable_cores
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.tokenization.doc_tokenizer import UpgradingTokenizer, load_tokenizer

try:
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("fwe_cli.loader.FineWebDataset needs torch: pip install 'fwe[torch]'") from None

from fwe_cli.loader.worker_wire import for_the_wire  # noqa: E402 (torch first, for the message above)

STATE_KIND = "fwe_dataset"
STATE_VERSION = 1
SAMPLE_KEYS = {"input": "input_ids", "positions": "position_ids"}
"""Sample mode: the batch keys a row carries, under the names HF models take (labels = input_ids, added apart)."""


class FineWebDataset(IterableDataset):
    """fwe's batches (or, with `samples`, their rows) over the config's shard, split among DataLoader workers."""

    def __init__(self, config: LoaderConfig, samples: bool = False):
        if not isinstance(config, LoaderConfig):
            raise ConfigError(f"FineWebDataset takes a LoaderConfig (resolve_config(...)), got {config!r}")
        if samples and config.labels:
            raise ConfigError("FineWebDataset(samples=True) yields HF causal-LM rows (labels = input_ids: the model "
                              "shifts them): leave labels off its config")
        self.config = config
        self.samples = samples
        self.epoch = 0
        prepare_tokenizer(config)
        self._pending: dict | None = None  # a loaded state, for the next pass to start from
        self._loader: FineWebLoader | None = None  # the pass in progress (in this process)
        self._last: FineWebLoader | None = None  # the last pass's, closed, for its stats
        self._ended: dict | None = None  # the state at the end of the last pass
        self._before: dict | None = None  # sample mode: the loader's state before the batch in progress
        self._taken = 0  # sample mode: rows of that batch taken
        self._batch_rows: int | None = None  # sample mode: its rows (None: not fetched yet)

    # -- where this copy runs ------------------------------------------------------------------------
    def _place(self) -> dict:
        """This copy's place: the config's shard (world, rank) and the DataLoader worker (num_workers, worker)."""
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (0, 0)
        return {"world": self.config.shard.mod, "rank": self.config.shard.rem, "num_workers": workers,
                "worker": worker}

    def _pass_config(self, place: dict) -> LoaderConfig:
        """The loader config of this worker's pass: its shard, tokenizer threads, and the epoch's shuffle."""
        split = max(1, place["num_workers"])
        changes: dict[str, Any] = {"shard": Shard(place["world"] * split, place["rank"] * split + place["worker"])}
        if not self.config.tokenizer_threads and split > 1:
            changes["tokenizer_threads"] = max(1, usable_cores() // split)
        if self.config.shuffle_seed is not None:
            changes["shuffle_seed"] = self.config.shuffle_seed + self.epoch
        return self.config.replace(**changes)

    # -- the torch protocol ----------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """The passes after this one shuffle as pass `epoch` (a resumed pass keeps the epoch it was saved in)."""
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ConfigError(f"set_epoch takes an epoch number >= 0, got {epoch!r}")
        self.epoch = epoch

    def __iter__(self) -> Iterator:
        """One pass: a loader over this worker's shard, from the state loaded if any; its batches, or their rows."""
        place = self._place()
        config = self._pass_config(place)
        pending, self._pending = self._pending, None
        self._close_pass()
        self._ended = None
        loader = self._loader = FineWebLoader(config, state=pending["loader"] if pending else None)
        try:
            if self.samples:
                yield from self._sample_rows(loader, pending)
            elif place["num_workers"]:  # to the main process as bytes, not a shared-memory segment per array
                yield from map(for_the_wire, loader)
            else:
                yield from loader
            if self._loader is loader:  # not ended by a newer pass (an abandoned pass can end after the next began)
                self._ended = self._outer_state(loader.state_dict(), 0)
        finally:
            if self._loader is loader:
                self._close_pass()
            loader.close()

    def _sample_rows(self, loader: FineWebLoader, pending: dict | None) -> Iterator[dict]:
        skip = pending["rows"] if pending else 0
        self._before, self._taken = (pending["loader"] if pending else None), skip
        for batch in loader:
            rows = sample_rows(batch)
            self._batch_rows = len(rows)
            for taken in range(skip, len(rows)):
                self._taken = taken + 1
                yield rows[taken]
            skip = 0
            self._before, self._taken, self._batch_rows = loader.state_dict(), 0, None  # next batch

    def state_dict(self) -> dict:
        """Where this copy is: after the last batch (row) it yielded; before its first pass, the state it was given
        (or a fresh start). JSON-able; `load_state_dict` in the copy of the same place continues from it."""
        if self._loader is None:
            if self._ended is not None:
                return self._ended
            if self._pending is not None:
                return dict(self._pending)
            return self._outer_state(None, 0)
        if self.samples and self._taken != self._batch_rows:  # within a batch (or before the first one's rows)
            return self._outer_state(self._before, self._taken)
        return self._outer_state(self._loader.state_dict(), 0)

    def load_state_dict(self, state: dict) -> None:
        """The next pass continues from `state` (a `state_dict()` of the copy of this place). ConfigError, in one
        line naming both, for a state of another world size, num_workers, rank, worker or mode."""
        if not isinstance(state, dict) or state.get("kind") != STATE_KIND:
            raise ConfigError(f"not a FineWebDataset state (no kind {STATE_KIND!r}): give what state_dict() returned")
        if state.get("version") != STATE_VERSION:
            raise ConfigError(f"a FineWebDataset state of version {state.get('version')!r}; this fwe reads version "
                              f"{STATE_VERSION}")
        place = self._place()
        saved = {key: state.get(key) for key in place}
        if saved != place:
            raise ConfigError(f"the DataLoader state was saved by {_where(saved)}, this is {_where(place)}: resume "
                              "with the world size and num_workers it was saved with, or start without the state")
        if bool(state.get("samples")) != self.samples:
            raise ConfigError(f"the DataLoader state was saved with samples={bool(state.get('samples'))}, this "
                              f"dataset has samples={self.samples}: resume in the same mode")
        self.epoch = int(state.get("epoch", 0))
        self._pending = dict(state)
        self._ended = None

    def stats(self) -> dict | None:
        """The loader's stats (FineWebLoader.stats) of this copy's pass in progress, else of its last pass; None
        before its first."""
        loader = self._loader or self._last
        return loader.stats() if loader is not None else None

    # -- internals -------------------------------------------------------------------------------------
    def _outer_state(self, loader_state: dict | None, rows: int) -> dict:
        return {"kind": STATE_KIND, "version": STATE_VERSION, **self._place(), "samples": self.samples,
                "epoch": self.epoch, "loader": loader_state, "rows": rows}

    def _close_pass(self) -> None:
        loader, self._loader = self._loader, None
        self._before, self._taken, self._batch_rows = None, 0, None
        if loader is not None:
            loader.close()
            self._last = loader

    def __getstate__(self) -> dict:
        """A copy for a DataLoader worker process: the settings and any loaded state, no pass in progress."""
        return dict(self.__dict__, _loader=None, _last=None, _before=None, _taken=0, _batch_rows=None)


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


def _where(place: dict) -> str:
    workers = "no DataLoader workers" if not place["num_workers"] else \
        f"worker {place['worker']} of num_workers={place['num_workers']}"
    return f"rank {place['rank']} of world size {place['world']}, {workers}"


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

"""One rank of a case's world through its adapter: read to the end, or stopped after its cut with its state taken,
or resumed from a state (its own, or every rank's of another world). Batches come back as bytes (each row's, in
sample mode), states as the adapter gives them, sent through the case's serialisation (as is, pickled as torch.save
does, or through JSON).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import orjson

from fwe_cli.loader.shard import Shard
from scripts.check_resume.cases import Case
from scripts.check_resume.data import Made


def carried(state: Any, how: str) -> Any:
    """`state` as it comes back from its journey: as is, pickled, or through JSON."""
    if how == "pickle":
        return pickle.loads(pickle.dumps(state))
    if how == "json":
        return orjson.loads(orjson.dumps(state))
    return state


def tokens(item: Any) -> np.ndarray:
    """A batch's (or a row's) input tokens, flat."""
    if isinstance(item, dict):
        item = item.get("input", item.get("input_ids"))
    return np.asarray(item).reshape(-1)


def run(made: Made, case: Case, shard: Shard, workers: int, limit: int | None = None, state: Any = None,
        world: list | None = None) -> tuple[list[bytes], Any]:
    """(the items the rank took, each as bytes; its state after them) through the case's adapter, from `state` (its
    own) or `world` (every rank's of another world), taking `limit` items or all."""
    config = made.config(shard)
    take = {"loader": _loader, "dataloader": _dataloader, "grain": _grain}[case.adapter]
    items, after = take(config, case, workers, limit, state, world)
    return [np.ascontiguousarray(tokens(item), dtype=np.int64).tobytes() for item in items], after


def _taken(iterator, limit: int | None) -> list:
    items = []
    for item in iterator:
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    return items


def _loader(config, case: Case, workers: int, limit, state, world):
    from fwe_cli.loader import FineWebLoader

    with FineWebLoader(config, state=world if world is not None else state) as loader:
        items = [np.array(b) for b in _taken(loader, limit)] if limit != 0 else []
        return items, loader.state_dict()


def _dataloader(config, case: Case, workers: int, limit, state, world):
    from torchdata.stateful_dataloader import StatefulDataLoader

    from fwe_cli.loader import FineWebDataset

    dataset = FineWebDataset(config, samples=case.samples)
    if world is not None:
        dataset.load_world(world)
    extra = {"persistent_workers": case.persistent} if workers else {}
    loader = StatefulDataLoader(dataset, batch_size=None, num_workers=workers,
                                snapshot_every_n_steps=case.snapshot, **extra)
    if state is not None:
        loader.load_state_dict(state)
    try:
        it = iter(loader)
        items = [_copied(item) for item in _taken(it, limit)] if limit != 0 else []
        after = loader.state_dict()
        del it
        return items, after
    finally:
        del loader  # its workers end now


def _copied(item: Any) -> Any:
    """The item's arrays, copied (a tensor's through numpy)."""
    if isinstance(item, dict):
        return {key: _copied(value) for key, value in item.items()}
    return np.array(item.numpy() if hasattr(item, "numpy") else item)


def _grain(config, case: Case, workers: int, limit, state, world):
    from fwe_cli.train.grain_dataset import FineWebIterDataset

    iterator = iter(FineWebIterDataset(config, rows=case.samples))
    try:
        if state is not None:
            iterator.set_state(state)
        items = [_copied(item) for item in _taken(iterator, limit)] if limit != 0 else []
        return items, iterator.get_state()
    finally:
        iterator.close()

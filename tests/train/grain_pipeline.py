"""The Grain pipeline the Grain tests run, in the test's process or in a fresh one:

    python -m tests.train.grain_pipeline CONFIG_JSON STATE_JSON OUT_NPY N

builds the pipeline of CONFIG_JSON (a LoaderConfig.to_json()) with 2 mp_prefetch workers, sets the state of
STATE_JSON, and saves its next N batches to OUT_NPY (stacked)."""

from __future__ import annotations

import sys
from pathlib import Path

import grain
import numpy as np
import orjson

from fwe_cli.loader import LoaderConfig
from fwe_cli.train.grain_dataset import FineWebIterDataset

WORKERS = 2


def pipeline(config: LoaderConfig, workers: int = WORKERS) -> grain.IterDataset:
    """fwe's batches of `config` prefetched by `workers` worker processes, 2 batches buffered each."""
    options = grain.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=2)
    return FineWebIterDataset(config).mp_prefetch(options)


def take(iterator, n: int) -> list[np.ndarray]:
    """The next `n` batches, copied out of Grain's shared memory (which each element frees when dropped)."""
    return [np.array(next(iterator)) for _ in range(n)]


def main(config_path: str, state_path: str, out_path: str, n: str) -> None:
    config = LoaderConfig.from_json(orjson.loads(Path(config_path).read_bytes()))
    iterator = iter(pipeline(config))
    try:
        iterator.set_state(orjson.loads(Path(state_path).read_bytes()))
        np.save(out_path, np.stack(take(iterator, int(n))))
    finally:
        iterator.close()


if __name__ == "__main__":
    main(*sys.argv[1:])

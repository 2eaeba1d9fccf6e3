"""The loader core: read -> shard -> tokenize -> pack -> prefetch, with no typer/rich.

    from fwe_cli.loader import FineWebLoader, resolve_config

    config = resolve_config(local_path="/data/fwe_bootstrap", tokenizer="gpt2")
    with FineWebLoader(config) as loader:
        for batch in loader:      # numpy int32 [batch_size, seq_len]
            ...

Wings, one job each (ARCHITECTURE.md draws them): `sources/` (what every source shares) with the kinds in
`files/`, `hub/` and `compose/`; `config` (the one frozen config and its resolution) and `stream` (a reader's
documents); `pipeline/` (the producer: tokenization/ -> rows/), `state/` (resume); `flow/` (thread tools) and
`remote/` (HTTP, retries, the Hub's environment) below them. `FineWebDataset` (the loader as a torch
IterableDataset, needs torch) lives with the other trainer adapters in fwe_cli.train and is re-exported here.
The public names below are imported on first use, so `import fwe_cli.loader.config` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_PUBLIC = {
    "FineWebLoader": "fwe_cli.loader.fineweb_loader",
    "FineWebDataset": "fwe_cli.train.torch_dataset",
    "LoaderConfig": "fwe_cli.loader.config",
    "Shard": "fwe_cli.loader.config",
    "resolve_config": "fwe_cli.loader.config",
    "ConfigError": "fwe_cli.errors",
    "FweError": "fwe_cli.errors",
    "LoaderError": "fwe_cli.errors",
    "LoaderTimeout": "fwe_cli.errors",
    "SourceError": "fwe_cli.errors",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:
    from fwe_cli.errors import ConfigError, FweError, LoaderError, LoaderTimeout, SourceError
    from fwe_cli.loader.config import LoaderConfig, Shard, resolve_config
    from fwe_cli.loader.fineweb_loader import FineWebLoader
    from fwe_cli.train.torch_dataset import FineWebDataset  # a lazy re-export (fwe_cli.train is above the loader)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'fwe_cli.loader' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)

"""fwe: a FineWeb-Edu data loader that never leaves a GPU waiting.

Public API (see README "Python API"):

    from fwe_cli import LoaderConfig, FineWebLoader, resolve_config

    cfg = resolve_config(source="local", local_path="/data/fwe_bootstrap", tokenizer="gpt2")
    with FineWebLoader(cfg) as loader:
        for step, batch in enumerate(loader):   # numpy int32 [batch_size, seq_len]
            ...
        print(loader.stats())
"""

__version__ = "0.1.0"

from fwe_cli.config import LoaderConfig, Shard, resolve_config  # noqa: E402
from fwe_cli.errors import (  # noqa: E402
    ConfigError,
    FweError,
    LoaderError,
    LoaderTimeout,
    SourceError,
)
from fwe_cli.loader import FineWebLoader  # noqa: E402

__all__ = [
    "ConfigError",
    "FineWebLoader",
    "FweError",
    "LoaderConfig",
    "LoaderError",
    "LoaderTimeout",
    "Shard",
    "SourceError",
    "__version__",
    "resolve_config",
]

"""Take one batch from the native Hub reader in a fresh, sealed process and print, as JSON, which of the heavy
modules a warm start must not need were imported by then (for tests/loader/test_hub_warm_imports.py):

    python -m tests.hubsim.first_batch_imports      # -> {"heavy": [...], "head_cache": {...}}
"""

from __future__ import annotations

import sys

import orjson

from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.fineweb_loader import FineWebLoader

# pyarrow (the parquet decoder), httpx (huggingface_hub's HTTP client), huggingface_hub's download module, datasets
HEAVY = ("pyarrow", "httpx", "httpx2", "huggingface_hub.file_download", "datasets", "torch")


def main() -> None:
    loader = FineWebLoader(resolve_config(env={}, source="hub", hub_reader="native", tokenizer="gpt2", seq_len=256,
                                          batch_size=2))
    loader.next_batch()
    heavy = sorted(name for name in HEAVY if name in sys.modules)
    source = loader.stats()["source"]
    loader.close(abandon_encodes=True)
    sys.stdout.buffer.write(orjson.dumps({"heavy": heavy, "head_cache": source.get("head_cache")}))


if __name__ == "__main__":
    main()

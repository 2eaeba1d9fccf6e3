"""Print, as JSON, the ids of the documents fwe's DocumentStream yields from the Hub (for tests that compare the
native and the `datasets` Hub readers in fresh, sealed processes):

    python -m tests.hubsim.doc_ids READER SHARD_MOD SHARD_REM [CONFIG [WHERE]]   # -> {"ids": [...], "source": ...}

(CONFIG: the dataset config, default sample-10BT; WHERE: a row filter, --where.)
"""

from __future__ import annotations

import os
import sys

import orjson

from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.stream import DocumentStream

# as in the `fwe` process: `datasets` would import torch for each streaming dataset it builds, and no id depends on it
os.environ.setdefault("USE_TORCH", "0")


def main(argv: list[str]) -> None:
    reader, mod, rem = argv[0], int(argv[1]), int(argv[2])
    chosen = dict(zip(("name", "where"), argv[3:5]))
    stream = DocumentStream(resolve_config(env={}, source="hub", hub_reader=reader, shard_mod=mod, shard_rem=rem,
                                           **chosen))
    ids = [doc.id for doc in stream]
    sys.stdout.buffer.write(orjson.dumps({"ids": ids, "source": stream.describe()}))


if __name__ == "__main__":
    main(sys.argv[1:])

"""A torch.distributed job reading the Hub natively, for `torchrun` (tests/loader/test_hub_ranks.py):

    torchrun --standalone --nproc-per-node 2 tests/loader/hub_ranks_job.py OUT_DIR

HF_ENDPOINT comes from the environment. Each rank uses an HF_HOME of its own (OUT_DIR/hf_home_rank{r}), so that only
rank 0's broadcast can spare a rank the Hub's metadata; it joins a gloo group, makes a loader with no shard flags
(the shard comes from RANK/WORLD_SIZE), takes one batch (byte tokenizer), closes it, then does the same again (a
warm start: the listing is cached), and writes OUT_DIR/rank{r}.json: the commit and files each loader read, and the
first batch's documents.
"""

from __future__ import annotations

import json
import os
import sys


def main(out_dir: str) -> None:
    rank = int(os.environ["RANK"])
    home = os.path.join(out_dir, f"hf_home_rank{rank}")
    os.environ.update(HF_HOME=home, HF_HUB_CACHE=os.path.join(home, "hub"))
    from datetime import timedelta

    import numpy as np
    import torch.distributed as dist

    from fwe_cli.loader import FineWebLoader, resolve_config
    from tests.rank_train import decode_documents, end_rank

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    config = resolve_config(source="hub", tokenizer="byte", seq_len=2048, batch_size=4, loader_timeout=120.0)
    report = {"rank": rank, "shard": [config.shard.mod, config.shard.rem], "opens": []}
    for _ in ("cold", "warm"):
        with FineWebLoader(config) as loader:
            batch = np.array(loader.next_batch())
            source = loader.stats()["source"]
        report["opens"].append({"revision": source["revision"], "files": source["files"],
                                "docs": decode_documents([batch]), "complete": decode_documents([batch], True)})
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    end_rank(dist)


if __name__ == "__main__":
    main(sys.argv[1])

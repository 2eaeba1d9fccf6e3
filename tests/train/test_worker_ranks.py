"""Inside a DataLoader worker of a torch.distributed job, fwe's loader does not take part in the job's collectives:
the worker is forked from its rank, inherits the initialised process group (and its store connection), and a group or
broadcast made there would pair with other ranks' workers on the parent's connection. A worker is no rank of the job
(remote.job_ranks), so each worker lists the Hub for itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT, fwe_env

pytest.importorskip("torch")

RANK = """
import sys, torch, torch.distributed as dist
from fwe_cli.loader.remote import job_ranks

class Probe(torch.utils.data.IterableDataset):
    def __iter__(self):
        yield job_ranks.torch_distributed() is None

rank, init = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
in_rank = job_ranks.torch_distributed() is None
in_worker = next(iter(torch.utils.data.DataLoader(Probe(), batch_size=None, num_workers=1)))
print(in_rank, bool(in_worker))
dist.destroy_process_group()
"""


def test_a_dataloader_worker_is_not_a_rank_of_the_job(tmp_path):
    """Two gloo ranks: each sees a torch.distributed job of two ranks (fwe shares the Hub listing across them), and
    each one's DataLoader worker sees none."""
    init = f"file://{tmp_path / 'store'}"
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(rank), init], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=fwe_env()) for rank in range(2)]
    outputs = [proc.communicate(timeout=300) for proc in ranks]
    assert all(proc.returncode == 0 for proc in ranks), [err[-2000:] for _out, err in outputs]
    assert [out.split() for out, _err in outputs] == [["False", "True"]] * 2

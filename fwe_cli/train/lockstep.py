"""Every rank stops at the same step: the end of an epoch of a data-parallel job whose readers hold different token
counts (each reader's share is dealt by bytes, sources.deal: ranks differ by a few batches).

    for batch in lockstep(loader):        # under torch.distributed: ends on every rank at the first rank's end
        loss = model(batch) ...; loss.backward()          # (DDP's all-reduces never wait for a rank that stopped)

Each step the ranks agree, with one all_reduce (MIN) of one integer on a gloo group of its own, whether all of them
still have a batch; at the first step one has none, every rank's iteration ends there, the batches beyond it unread
(a resume state saved then continues them). About 0.1 ms a step on one node. Outside a torch.distributed job of
more than one rank (or in a DataLoader worker), the batches pass as they are.
"""

from __future__ import annotations

from typing import Iterable, Iterator, TypeVar

from fwe_cli.loader.remote.job_ranks import torch_distributed

T = TypeVar("T")
_END = object()
_groups: dict = {}  # the default group -> lockstep's gloo group for it (made once, on the caller's thread)


def lockstep(batches: Iterable[T], group=None) -> Iterator[T]:
    """`batches` while every rank of the job has one (see the module docstring); `group`: a process group to agree
    in (default: a gloo group of all ranks, made once)."""
    dist = torch_distributed()
    if dist is None:
        yield from batches
        return
    import torch

    if group is None:
        default = dist.distributed_c10d._get_default_group()
        group = _groups.get(id(default)) or _groups.setdefault(id(default), dist.new_group(backend="gloo"))
    for batch in _with_end(batches):
        flag = torch.tensor([0 if batch is _END else 1], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
        if not flag.item():
            return
        yield batch


def _with_end(batches: Iterable[T]) -> Iterator[object]:
    yield from batches
    while True:
        yield _END

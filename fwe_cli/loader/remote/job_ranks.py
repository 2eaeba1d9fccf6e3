"""The ranks of a torch.distributed job as one Hub client: rank 0 asks, every other rank is told.

    join_ranks(timeout_s)                    # on the caller's thread, when a loader is made (FineWebLoader does)
    value = share("key", make, keep)         # later, on any thread: rank 0 runs make(); the others get its value

When the caller has imported torch and initialised torch.distributed (is_available() and is_initialized(), more than
one rank), a loader over the native Hub reader makes one gloo process group for fwe (once per process), and
`share` broadcasts rank 0's answer on it (broadcast_object_list): the Hub listing, so that no other rank asks the
Hub for metadata. torch is never imported here: a process that has not imported it is not a torch.distributed job.

Why a group of its own, made on the caller's thread: the listing is resolved on the loader's producer thread, while
the training loop runs collectives on the default group from the main thread; two threads' collectives on one
group could pair up differently on different ranks. A new group must be made by every rank in the same order
relative to the others it makes, which the caller's thread guarantees and a background thread would not.

What it asks of a job: every rank makes its Hub loaders, in the same order (each loader's open broadcasts once).
A rank whose open names another listing than rank 0's gets a one-line error saying so, not rank 0's files.
"""

from __future__ import annotations

import sys
import threading
from datetime import timedelta
from typing import Any, Callable

from fwe_cli.errors import SourceError

GROUP_SLACK_S = 60.0  # the group's timeout is the loader's plus this: rank 0's retries end before the others give up
_lock = threading.Lock()  # one broadcast at a time in this process, in the order the opens come
_join_lock = threading.Lock()  # apart: a loader made while another one's open waits for rank 0 must not wait too
_joined: tuple[Any, Any] = (None, None)  # (the default group fwe's group was made for, fwe's group): set at once


def torch_distributed():
    """torch.distributed when the caller runs a torch.distributed job of more than one rank, else None (also in a
    DataLoader worker: forked from its rank, it inherits the process group, but is no rank of it)."""
    if "torch" not in sys.modules:
        return None
    data = sys.modules.get("torch.utils.data")
    if data is not None and data.get_worker_info() is not None:
        return None
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
            return None
    except (RuntimeError, ValueError):
        return None
    return dist


def join_ranks(timeout_s: float) -> None:
    """Make fwe's group of the job's ranks (on the caller's thread, for a loader that lists the Hub) when this is a
    torch.distributed job, its collectives timing out after `timeout_s` and a slack; afterwards `share` broadcasts.
    Once per process (per default group)."""
    dist = torch_distributed()
    if dist is None or not dist.is_gloo_available():
        return
    global _joined
    with _join_lock:
        if _joined[0] is dist.group.WORLD:
            return
        timeout = timedelta(seconds=timeout_s + GROUP_SLACK_S)
        _joined = (dist.group.WORLD, dist.new_group(backend="gloo", timeout=timeout))


def _group(dist):
    world, group = _joined
    return group if world is not None and world is dist.group.WORLD else None


def share(key: str, make: Callable[[], Any], keep: Callable[[Any], None] = lambda value: None,
          set_stage: Callable[[str], None] = lambda stage: None, what: str = "rank 0's answer") -> Any:
    """`make()` on rank 0, its value (or its error, as a SourceError) on every rank of a joined job; `keep(value)` on
    the ranks that were told, which `set_stage` says are waiting for `what`. Outside a joined job: `make()`. `key`
    names what is made, in a few words: ranks must agree on it."""
    dist = torch_distributed()
    group = _group(dist) if dist is not None else None
    if group is None:
        return make()
    with _lock:
        if dist.get_rank() == 0:
            try:
                value = make()
            except Exception as exc:
                dist.broadcast_object_list([{"key": key, "error": f"{exc}"}], src=0, group=group)
                raise
            dist.broadcast_object_list([{"key": key, "value": value}], src=0, group=group)
            return value
        set_stage(f"waiting for {what} (torch.distributed)")
        told: list[Any] = [None]
        dist.broadcast_object_list(told, src=0, group=group)
    answer = told[0]
    if answer.get("key") != key:
        raise SourceError(f"rank 0 opened {answer.get('key')!r} where this rank opened {key!r}: make the Hub loaders "
                          "in the same order on every rank")
    if "error" in answer:
        raise SourceError(f"{answer['error']} (rank 0's error: it asks the Hub for the job)")
    keep(answer["value"])
    return answer["value"]

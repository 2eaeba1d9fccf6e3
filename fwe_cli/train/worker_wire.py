"""How a batch crosses from a DataLoader worker to the main process: as the bytes of its arrays in the pickle.

torch sends a tensor between processes as a shared-memory segment: one segment per tensor, made, mapped and passed
as a file descriptor over a socket each time. For batches of fwe's size that costs several times what copying their
bytes through the worker's queue does (runbooks/train.md measures both). `for_the_wire` wraps a worker's batch
arrays as `WireArray`s, numpy views that DataLoader's `default_convert` leaves alone and that pickle as their bytes,
unpickled in the main process as torch tensors: the loop receives the same tensors (pinned by `pin_memory` as
before), and `default_collate`, which takes any ndarray, still stacks them where a DataLoader batches them again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class WireArray(np.ndarray):
    """A view of a batch array that pickles as its bytes and unpickles as a torch tensor of the same dtype/shape."""

    def __reduce__(self):
        array = np.ascontiguousarray(self)
        return _tensor, (bytearray(array.data), array.dtype.str, array.shape)


def _tensor(data: bytearray, dtype: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The tensor a WireArray was (its memory is `data`'s: no copy past the unpickling)."""
    return torch.from_numpy(np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape))


def for_the_wire(batch: Any) -> Any:
    """`batch` (an array or CPU tensor, or a dict of them) with its arrays as WireArrays; anything else unchanged."""
    if isinstance(batch, dict):
        return {key: for_the_wire(value) for key, value in batch.items()}
    if isinstance(batch, torch.Tensor) and batch.device.type == "cpu":
        batch = batch.numpy()
    if isinstance(batch, np.ndarray):
        return batch.view(WireArray)
    return batch

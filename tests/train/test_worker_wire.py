"""A batch from a DataLoader worker crosses to the main process as its bytes (fwe_cli.train.worker_wire): it
arrives as a torch tensor of the same dtype, shape and values, never as a shared-memory segment, and DataLoader's own
conversion and collation treat it as the array it is."""

from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402
from torch.utils.data._utils.collate import default_collate, default_convert  # noqa: E402

from fwe_cli.loader import FineWebDataset, resolve_config  # noqa: E402
from fwe_cli.train.worker_wire import WireArray, for_the_wire  # noqa: E402
from tests.train.corpus import write_corpus  # noqa: E402


def _over_the_queue(obj):
    """What the main process receives when a worker puts `obj` on its queue (the pickler DataLoader's queues use)."""
    data = bytes(ForkingPickler.dumps(obj))
    return data, pickle.loads(data)


@pytest.mark.parametrize("array", [np.arange(24, dtype=np.int32).reshape(4, 6),
                                   np.arange(48, dtype=np.int64).reshape(6, 8)[::2, 1:7],  # not contiguous
                                   np.zeros((0, 5), dtype=np.int32)])
def test_an_array_arrives_as_a_tensor_of_its_bytes(array):
    """The pickled form holds the array's bytes and no file descriptor or shared-memory handle; the receiver gets a
    torch tensor equal to the array, with its dtype and shape."""
    data, got = _over_the_queue(for_the_wire(array))
    assert np.ascontiguousarray(array).tobytes() in data
    assert b"rebuild_storage" not in data and b"share" not in data
    assert isinstance(got, torch.Tensor) and not isinstance(got, WireArray)
    assert got.dtype == torch.from_numpy(array).dtype and tuple(got.shape) == array.shape
    assert np.array_equal(got.numpy(), array)


def test_dicts_and_cpu_tensors_cross_by_value_and_other_things_unchanged():
    """A dict batch (labels, boundaries) arrives as a dict of tensors; a CPU tensor batch (as_torch) crosses as its
    bytes too; what is not an array is left as it is."""
    inputs = np.arange(12, dtype=np.int32).reshape(2, 6)
    batch = {"input": inputs, "labels": torch.from_numpy(inputs + 1), "cu_seqlens": np.array([0, 3, 6])}
    data, got = _over_the_queue(for_the_wire(batch))
    assert sorted(got) == ["cu_seqlens", "input", "labels"] and b"rebuild_storage" not in data
    assert all(isinstance(v, torch.Tensor) for v in got.values())
    assert got["labels"].tolist() == (inputs + 1).tolist() and got["cu_seqlens"].tolist() == [0, 3, 6]
    assert for_the_wire("text") == "text" and for_the_wire(None) is None


def test_dataloader_conversion_leaves_it_and_collation_stacks_it():
    """default_convert (batch_size=None) passes a WireArray through untouched, to be pickled as bytes; default_collate
    (a DataLoader batching fwe's batches again) stacks WireArrays into one tensor as it does arrays."""
    wire = for_the_wire(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert default_convert(wire) is wire
    stacked = default_collate([wire, wire])
    assert isinstance(stacked, torch.Tensor) and tuple(stacked.shape) == (2, 2, 3)


def test_batches_from_workers_are_plain_int32_tensors(tmp_path):
    """Through two DataLoader workers, every batch the loop receives is a torch.int32 tensor of the batch's shape
    (the wire form never reaches the loop); values are checked against the loader in tests/train."""
    config = resolve_config(env={}, local_path=str(write_corpus(tmp_path / "docs.jsonl", 40)), tokenizer="byte",
                            seq_len=16, batch_size=4)
    got = list(DataLoader(FineWebDataset(config), batch_size=None, num_workers=2))
    assert got and all(type(b) is torch.Tensor and b.dtype == torch.int32 and tuple(b.shape) == (4, 16) for b in got)

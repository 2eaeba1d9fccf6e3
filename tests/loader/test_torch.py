"""With torch installed and asked for, batches are torch tensors equal to the numpy batches (pinned with CUDA)."""

import numpy as np
import pytest

from fwe_cli.loader import ConfigError, FineWebLoader, resolve_config


def test_as_torch_without_torch_is_a_clear_error(monkeypatch):
    """as_torch without torch importable is a ConfigError at construction saying how to install it."""
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("no torch here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(ConfigError, match="needs torch installed"):
        FineWebLoader(resolve_config(env={}, source="synthetic", as_torch=True))


def test_torch_batches_equal_numpy_batches():
    """as_torch yields int32 tensors equal to the numpy batches, pinned exactly when CUDA is available."""
    torch = pytest.importorskip("torch")
    base = resolve_config(env={}, source="synthetic", seq_len=64, batch_size=4)
    with FineWebLoader(base) as loader:
        expected = [next(loader) for _ in range(3)]
    with FineWebLoader(base.replace(as_torch=True)) as loader:
        got = [next(loader) for _ in range(3)]
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.int32 for t in got)
    assert all(np.array_equal(t.numpy(), e) for t, e in zip(got, expected))
    assert all(t.is_pinned() == torch.cuda.is_available() for t in got)

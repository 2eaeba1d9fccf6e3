"""With torch installed and asked for, batches are torch tensors equal to the numpy batches (pinned with CUDA)."""

import numpy as np
import pytest

from fwe_cli.loader import ConfigError, FineWebLoader, resolve_config


def test_as_torch_without_torch_is_a_clear_error(monkeypatch):
    """as_torch without torch installed is a ConfigError at construction saying how to install it (torch itself is
    imported later, beside the source's opening, so the check asks the import system whether it could be found)."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
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


def test_torch_is_imported_only_when_tensors_are_asked_for():
    """A loader yielding numpy batches never imports torch (seconds of import for nothing); one with as_torch does,
    on its own thread beside the source."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    from tests.helpers import REPO_ROOT

    code = ("import sys; from fwe_cli.loader import FineWebLoader, resolve_config\n"
            "for as_torch in (False, True):\n"
            "    with FineWebLoader(resolve_config(env={}, source='synthetic', seq_len=64, as_torch=as_torch)) as l:\n"
            "        batch = next(l)\n"
            "    print(type(batch).__module__.split('.')[0], 'torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["numpy False", "torch True"]

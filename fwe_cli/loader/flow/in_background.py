"""Work started on a named daemon thread now and waited for later, its error re-raised in the waiter: what the
pipeline's producer loads beside opening the source (the tokenizer, torch), and the slow imports a start overlaps
with its network waits."""

from __future__ import annotations

import contextvars
import importlib
import sys
import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import numpy as np


class InBackground:
    """`fn()` on a named daemon thread, started now in a copy of the caller's context (so a loader's work keeps the
    loader's Hub retry scope, transient.RetryScope); `result()` waits for it and re-raises its error in the caller."""

    def __init__(self, fn: Callable[[], object], name: str, on_done: Callable[[], None] = lambda: None):
        self._fn, self._on_done = fn, on_done
        self._value: object = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._run,), name=name,
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
            self._on_done()
        except BaseException as exc:  # noqa: BLE001 - handed to the producer, which raises it
            self._error = exc

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

    def ready(self, timeout: float):
        """The value if `fn` has returned within `timeout`, else None (failed or still running)."""
        self._thread.join(timeout)
        return self._value


def torch_converter() -> Callable[[object], object]:
    """numpy -> torch tensor (each of a dict's arrays), pinned when CUDA is present (done here, off the training
    thread)."""
    import torch

    pin = torch.cuda.is_available()

    def one(array: np.ndarray):
        tensor = torch.from_numpy(array)
        return tensor.pin_memory() if pin else tensor

    def convert(batch):
        return {key: one(value) for key, value in batch.items()} if isinstance(batch, dict) else one(batch)

    return convert


def import_in_background(module: str) -> None:
    """Import `module` on a named daemon thread (a slow import overlaps the network waits of the caller's thread),
    unless it is imported, or being imported, already."""
    if module in sys.modules:
        return
    threading.Thread(target=importlib.import_module, args=(module,), name=f"fwe-import-{module.split('.')[0]}",
                     daemon=True).start()

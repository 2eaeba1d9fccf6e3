"""Progress of the long writing runs (`fwe bootstrap`, `fwe tokenize`, and bootstrap's --tokenize step) on stderr, and
the signal guard that lets them stop at a resume point. Both commands import them from here."""

from __future__ import annotations

import signal
import threading
import time
from abc import ABC, abstractmethod

from fwe_cli.cli.output import console

PLAIN_EVERY_S = 5.0  # on a pipe (a CI log): one line this often, not a line per report


class StopOnSignal:
    """First Ctrl-C / SIGTERM: set `stop` (the run polls it and stops at the next resume point). Second Ctrl-C: abort
    at once (KeyboardInterrupt)."""

    def __init__(self):
        self.stop = threading.Event()
        self._saved: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.stop.set()
        console.print("[yellow]stopping: saving a resume point (Ctrl-C again to abort at once)[/]")

    def __enter__(self) -> "StopOnSignal":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)


class ProgressReporter(ABC):
    """A run's `on_progress` callback: a rich bar on a terminal, otherwise a plain line at most every PLAIN_EVERY_S
    (and on the last report). Subclasses say what the bar shows (`columns`, `bar`) and what the line says (`line`)."""

    def __init__(self, label: str, live: bool | None = None):
        self.label = label
        self.live = console.is_terminal if live is None else live
        self.progress = self.task = None
        self.last_line = 0.0

    @abstractmethod
    def columns(self) -> list:
        """The bar's rich columns."""

    @abstractmethod
    def bar(self, info: dict) -> tuple[int, int, dict]:
        """(total, completed, the fields the columns name) of one report."""

    @abstractmethod
    def line(self, info: dict) -> str:
        """One report as a plain line."""

    def final(self, info: dict) -> bool:
        """Whether this report is the last (its line is printed whatever the time since the previous one)."""
        return False

    def __enter__(self) -> "ProgressReporter":
        if self.live:
            from rich.progress import Progress

            self.progress = Progress(*self.columns(), console=console, transient=False)
            self.progress.start()
        return self

    def __call__(self, info: dict) -> None:
        if self.progress is not None:
            total, completed, fields = self.bar(info)
            if self.task is None:
                self.task = self.progress.add_task(self.label, total=total, **fields)
            self.progress.update(self.task, completed=completed, **fields)
            return
        now = time.monotonic()
        if self.last_line and now - self.last_line < PLAIN_EVERY_S and not self.final(info):
            return
        self.last_line = now
        console.print(self.line(info), soft_wrap=True)

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


class BootstrapProgress(ProgressReporter):
    """`fwe bootstrap`: bytes staged of the target, documents, speed, ETA."""

    def __init__(self, live: bool | None = None):
        super().__init__("bootstrap", live)

    def columns(self) -> list:
        from rich.progress import (BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        return [TextColumn(self.label), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                TextColumn("{task.fields[docs]:,} docs"), TimeRemainingColumn()]

    def bar(self, info: dict) -> tuple[int, int, dict]:
        return info["target_bytes"], info["bytes"], {"docs": info["documents"]}

    def final(self, info: dict) -> bool:
        return info["bytes"] >= info["target_bytes"]

    def line(self, info: dict) -> str:
        eta = "—" if info["eta_s"] is None else f"{info['eta_s']:.0f} s"
        return (f"{self.label}: {info['bytes'] / 1e9:.3f}/{info['target_bytes'] / 1e9:.3f} GB "
                f"({100 * min(1.0, info['bytes'] / info['target_bytes']):.1f}%), {info['documents']:,} docs, "
                f"{info['files']} parts, {info['mb_per_s']:.1f} MB/s, ETA {eta}")


class TokenizeProgress(ProgressReporter):
    """`fwe tokenize` (and bootstrap's --tokenize step): the source's bytes read, tokens and shards written."""

    def __init__(self, label: str = "tokenize", live: bool | None = None):
        super().__init__(label, live)

    def columns(self) -> list:
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn

        return [TextColumn(self.label), BarColumn(), DownloadColumn(),
                TextColumn("{task.fields[tokens]:,} tokens, {task.fields[shards]} shards"), TimeRemainingColumn()]

    def bar(self, info: dict) -> tuple[int, int, dict]:
        return info["source_bytes"], info["source_bytes_done"], {"tokens": info["tokens"], "shards": info["shards"]}

    def line(self, info: dict) -> str:
        share = info["source_bytes_done"] / info["source_bytes"] if info["source_bytes"] else 0.0
        return (f"{self.label}: {info['tokens']:,} tokens in {info['shards']} shards, {info['documents']:,} docs, "
                f"~{100 * min(1.0, share):.1f}% of the source, {info['tokens_per_s'] / 1e6:.2f} M tokens/s")


def tokenize_with_progress(config, stopper: StopOnSignal, label: str = "tokenize") -> dict:
    """`run_tokenize(config)` with its progress on stderr, stopping at a whole shard once `stopper` is set."""
    from fwe_cli.tokens.run import run_tokenize  # the core loads when a command runs, not for --help

    with TokenizeProgress(label) as reporter:
        return run_tokenize(config, on_progress=reporter, should_stop=stopper.stop.is_set)

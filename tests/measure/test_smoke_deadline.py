"""The first-batch limit has one owner, the loader: `next_batch(deadline=...)` keeps it, a fallback gets the limit
again, `returns_by` publishes the latest moment a call returns by, and smoke's last-resort watchdog only reads that.
On a fake clock (the loader's and smoke's `time`), so every moment is exact."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from fwe_cli.cli import smoke_cmd
from fwe_cli.cli.invocation import Run
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader import fineweb_loader
from fwe_cli.loader.fineweb_loader import FALLBACK_JOIN_S
from fwe_cli.measure import smoke


@pytest.fixture
def clock(monkeypatch):
    """A frozen perf_counter for the loader and smoke (now[0]; tests move it); their waits stay real."""
    now = [100.0]
    fake = SimpleNamespace(perf_counter=lambda: now[0])
    monkeypatch.setattr(fineweb_loader, "time", fake)
    monkeypatch.setattr(smoke, "time", fake)
    return now


def _watch_fetches(monkeypatch, clock, advance_to: float | None = None) -> list[tuple[float, float | None]]:
    """Record (wait, returns_by) at every fetch; `advance_to`: the clock's moment once the first fetch has run."""
    seen: list[tuple[float, float | None]] = []
    fetch = FineWebLoader._fetch

    def watched(self, timeout, limit=None):
        seen.append((timeout, self.returns_by))
        try:
            return fetch(self, timeout, limit)
        finally:
            if advance_to is not None and len(seen) == 1:
                clock[0] = advance_to

    monkeypatch.setattr(FineWebLoader, "_fetch", watched)
    return seen


def test_the_deadline_bounds_the_wait_and_returns_by_says_so(monkeypatch, clock):
    """A deadline nearer than the timeout shortens the wait to it and is what returns_by publishes; without one the
    timeout does; between calls returns_by is None."""
    seen = _watch_fetches(monkeypatch, clock)
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=64, loader_timeout=10)
    with FineWebLoader(config) as loader:
        assert loader.returns_by is None
        loader.next_batch(deadline=103.0)
        assert loader.returns_by is None
        loader.next_batch()
    assert seen == [(3.0, 103.0), (10.0, 110.0)]


def test_a_fallback_is_inside_returns_by_and_gets_the_limit_again(monkeypatch, clock, tmp_path):
    """synthetic_on_fail: the first call's moment leaves room for the failed producer's joins and a second limit;
    once fallen back, the synthetic first batch has the whole limit from that moment."""
    seen = _watch_fetches(monkeypatch, clock, advance_to=104.0)
    config = resolve_config(env={}, local_path=str(tmp_path / "missing.jsonl"), tokenizer="byte", seq_len=64,
                            loader_timeout=5, synthetic_on_fail=True)
    with pytest.warns(RuntimeWarning, match="FALLING BACK"), FineWebLoader(config) as loader:
        loader.next_batch()
        assert loader.fallback is not None and loader.returns_by is None
    assert seen == [(5.0, 105.0 + 2 * FALLBACK_JOIN_S + 5.0), (5.0, 109.0)]


def test_smoke_keeps_one_limit_for_all_batches_and_renews_it_after_a_fallback(monkeypatch, clock, tmp_path):
    """fwe smoke's batches share one deadline (start + --timeout); the batches after a fallback share a new one from
    the moment it happened."""
    deadlines: list[float | None] = []
    next_batch = FineWebLoader.next_batch

    def recorded(self, timeout=None, deadline=None):
        deadlines.append(deadline)
        batch = next_batch(self, timeout, deadline)
        clock[0] += 1.0
        return batch

    monkeypatch.setattr(FineWebLoader, "next_batch", recorded)
    good = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=64, loader_timeout=5)
    with FineWebLoader(good) as loader:
        taken = []
        smoke._pull(loader, 3, taken.append)
        assert len(taken) == 3
    assert deadlines == [105.0, 105.0, 105.0]
    deadlines.clear()
    failing = resolve_config(env={}, local_path=str(tmp_path / "missing.jsonl"), tokenizer="byte", seq_len=64,
                             loader_timeout=5, synthetic_on_fail=True)
    with pytest.warns(RuntimeWarning, match="FALLING BACK"), FineWebLoader(failing) as loader:
        taken = []
        smoke._pull(loader, 3, taken.append)
        assert len(taken) == 3
    assert deadlines == [108.0, 109.0, 109.0]  # fell back in the first call; the clock read 104 after it


class _Loader:
    """Stands in for a loader: returns_by as the test sets it; `read` is set once the watchdog has read it 3 times."""

    def __init__(self):
        self.moment: float | None = None
        self.fallback = None
        self.reads = 0
        self.read = threading.Event()

    @property
    def returns_by(self) -> float | None:
        self.reads += 1
        if self.reads >= 3:
            self.read.set()
        return self.moment


def test_the_watchdog_fires_only_past_the_loaders_moment_and_its_grace(monkeypatch):
    """While no call is in progress (returns_by None) the watchdog keeps reading and does not fire; once the
    published moment plus WATCHDOG_GRACE_S has passed, it fires."""
    fired = threading.Event()
    monkeypatch.setattr(smoke_cmd.Watchdog, "_fire", lambda self: fired.set())
    loader = _Loader()
    with smoke_cmd.Watchdog(loader, "unused.json", {}, Run()):
        assert loader.read.wait(60)  # a bound on a hung thread, not an expected duration
        assert not fired.is_set()
        loader.moment = smoke_cmd.time.perf_counter() - smoke_cmd.WATCHDOG_GRACE_S - 1.0
        assert fired.wait(60)

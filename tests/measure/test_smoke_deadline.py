"""fwe smoke's one time limit, on a fake clock: what a last-resort watchdog is told, before and after a fallback."""

from __future__ import annotations

import pytest

from fwe_cli.loader.fineweb_loader import FALLBACK_JOIN_S
from fwe_cli.measure import smoke


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(smoke.time, "perf_counter", lambda: now[0])
    return now


def test_without_fallback_the_watchdog_follows_the_deadline_itself(clock):
    """No synthetic_on_fail: the latest a working loader returns by is the deadline; remaining() counts down to it."""
    heard = []
    deadline = smoke.Deadline(10.0, fallback_allowed=False, on_change=lambda latest, fb: heard.append((latest, fb)))
    clock[0] += 4.0
    assert heard == [(110.0, None)] and deadline.remaining() == 6.0


def test_fallback_room_until_seen_then_a_fresh_limit_once(clock):
    """With synthetic_on_fail the watchdog's bound leaves the loader its fallback (join + a second timeout) so it
    never fires first; a seen fallback restarts the limit from that moment, and a second report changes nothing."""
    heard = []
    deadline = smoke.Deadline(10.0, fallback_allowed=True, on_change=lambda latest, fb: heard.append((latest, fb)))
    assert heard == [(110.0 + FALLBACK_JOIN_S + 10.0, None)] and deadline.at == 110.0
    clock[0] = 117.0
    fallback = {"reason": "LoaderTimeout: stuck", "from_source": "local"}
    deadline.fallback_seen(fallback)
    deadline.fallback_seen({"reason": "another"})
    assert heard[1:] == [(127.0, fallback)] and deadline.remaining() == 10.0

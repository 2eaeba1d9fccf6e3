"""fwe_cli.loader.remote.transient: which Hub failures are retried, how long it waits (full jitter, Retry-After, the
deadline), whom it tells, and what it reports when it gives up. (End to end against the test Hub: test_hub_smoke.py's
503/drop test, test_hub_ranks.py's 429 burst.)"""

from __future__ import annotations

import random
import threading
import warnings

import pytest

from fwe_cli.loader.remote.transient import (
    RetryPolicy,
    RetryScope,
    attempts_note,
    call_with_retries,
    hub_budget_s,
    retry_wait,
    scoped,
    transient_reason,
    unreachable_reason,
)


class FakeResponse:
    def __init__(self, status: int, headers: dict | None = None):
        self.status_code = status
        self.headers = headers or {}


class HTTPStatusError(Exception):
    def __init__(self, status: int, headers: dict | None = None):
        super().__init__(f"HTTP {status}")
        self.response = FakeResponse(status, headers)


class RemoteProtocolError(Exception):
    """Named like httpx's: a cut connection."""


class OfflineModeIsEnabled(ConnectionError):
    """Named like huggingface_hub's: never retried."""


def chained(outer: Exception, cause: Exception) -> Exception:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize("exc, expected", [
    (HTTPStatusError(503), ("HTTP 503", None)),
    (HTTPStatusError(429, {"Retry-After": "7"}), ("HTTP 429", 7.0)),
    (HTTPStatusError(404), None),
    (HTTPStatusError(401), None),
    (RemoteProtocolError("peer closed connection"), ("RemoteProtocolError", None)),
    (chained(ValueError("wrapped"), ConnectionResetError()), ("ConnectionResetError", None)),
    (chained(RuntimeError("datasets wrapper"), HTTPStatusError(502)), ("HTTP 502", None)),
    (chained(ConnectionError("Couldn't reach"), OfflineModeIsEnabled()), None),
    (FileNotFoundError("no such file"), None),
    (ValueError("bad config"), None),
], ids=["503", "429-retry-after", "404", "401", "cut", "reset-in-chain", "502-in-chain", "offline", "fnf", "value"])
def test_transient_reason_classifies_the_exception_chain(exc, expected):
    """Only 408/429/5xx, cut/refused connections and timeouts are transient; offline mode never is."""
    assert transient_reason(exc) == expected


class FakeClock:
    """time.monotonic stand-in that advances only when `sleep` is called."""

    def __init__(self):
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


class Ceiling(random.Random):
    """A jitter that always draws the top of its range: the backoff's ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Floor(random.Random):
    """A jitter that always draws 0 (the bottom of its range)."""

    def uniform(self, a: float, b: float) -> float:
        return a


THREE = RetryPolicy(attempts=3)


def test_retries_transient_failures_with_backoff_and_one_summary_line():
    """Two 503s then success: three calls, waits up to the backoff's ceilings of 1 s and 2 s, the result returned, and
    ONE warning at the end summing up the attempts, the seconds and the reasons (no line per retry)."""
    outcomes = [HTTPStatusError(503), HTTPStatusError(503), "ok"]
    clock = FakeClock()

    def call():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with pytest.warns(RuntimeWarning) as warned:
        assert call_with_retries(call, "opening x", sleep=clock.sleep, clock=clock, rng=Ceiling()) == "ok"
    assert clock.waits == [1.0, 2.0]
    assert [str(w.message) for w in warned] == [
        "fwe: opening x succeeded after 3 attempts over 3.0 s (retried: HTTP 503, HTTP 503)"]


def test_retry_after_is_honoured_up_to_a_cap():
    """A 429 with Retry-After 5 waits at least 5 s, whatever the jitter draws; an absurd Retry-After is capped at
    30 s."""
    for header, expected in (("5", 5.0), ("3600", 30.0)):
        outcomes = [HTTPStatusError(429, {"Retry-After": header}), "ok"]
        waits: list[float] = []

        def call():
            outcome = outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        with pytest.warns(RuntimeWarning):
            call_with_retries(call, "x", sleep=waits.append, rng=Floor())
        assert waits == [expected]


def test_gives_up_after_attempts_and_says_so_in_the_error_only():
    """Always 503, a policy of 3 attempts: the last exception is raised after 3 calls with no warning line;
    attempts_note (for the caller's one error line) reports the attempts and the seconds they took."""
    calls = []
    clock = FakeClock()

    def call():
        calls.append(1)
        raise HTTPStatusError(503)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(HTTPStatusError, match="^HTTP 503$") as raised:
            call_with_retries(call, "x", THREE, sleep=clock.sleep, clock=clock, rng=Ceiling())
    assert len(calls) == 3
    assert attempts_note(raised.value) == " after 3 attempts over 3.0 s"


class ConnectError(Exception):
    """Named like httpx's: the connection was refused or the name did not resolve."""


class ReadTimeout(Exception):
    """Named like httpx's: connected, no answer in time."""


@pytest.mark.parametrize("exc, expected", [
    (chained(FileNotFoundError("not cached"), ConnectError("[Errno 111] Connection refused")),
     "ConnectError: [Errno 111] Connection refused"),
    (ReadTimeout("timed out"), "ReadTimeout: timed out"),
    (ConnectionRefusedError(111, "refused"), "ConnectionRefusedError: [Errno 111] refused"),
    (chained(ConnectionError("Couldn't reach"), OfflineModeIsEnabled("offline")), "OfflineModeIsEnabled: offline"),
    (HTTPStatusError(503), None),
    (chained(FileNotFoundError("not cached"), HTTPStatusError(404)), None),
    (RemoteProtocolError("peer closed connection"), None),
], ids=["refused-in-chain", "read-timeout", "builtin-refused", "offline", "503", "404", "cut"])
def test_unreachable_reason_means_never_reached_or_never_answered(exc, expected):
    """Refused/DNS/connect failures, timeouts and offline mode are 'unreachable'; an HTTP answer or a cut
    connection (the server was there) is not."""
    assert unreachable_reason(exc) == expected


def test_fail_fast_gives_up_at_once_on_an_unreachable_hub_but_still_retries_a_503():
    """fail_fast: a refused connection is raised after one call with no wait; a 503 is retried as without it."""
    clock = FakeClock()

    def refused():
        raise chained(FileNotFoundError("not cached"), ConnectError("refused"))

    with pytest.raises(FileNotFoundError) as raised:
        call_with_retries(refused, "x", sleep=clock.sleep, clock=clock, fail_fast=True)
    assert clock.waits == [] and attempts_note(raised.value) == ""
    outcomes = [HTTPStatusError(503), "ok"]

    def flaky():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with pytest.warns(RuntimeWarning, match="succeeded after 2 attempts"):
        assert call_with_retries(flaky, "x", sleep=clock.sleep, clock=clock, fail_fast=True, rng=Ceiling()) == "ok"
    assert clock.waits == [1.0]


def test_permanent_errors_are_not_retried():
    """A 404 is raised at once: one call, no wait, no note."""
    waits: list[float] = []

    def call():
        raise HTTPStatusError(404)

    with pytest.raises(HTTPStatusError, match="^HTTP 404$") as raised:
        call_with_retries(call, "x", sleep=waits.append)
    assert waits == [] and attempts_note(raised.value) == ""


def test_waits_are_full_jitter_below_the_backoff_and_differ_between_generators():
    """Each wait is drawn from [0, ceiling] with the ceiling doubling per attempt (1, 2, 4, ... s, at most 30 s); two
    processes' generators (here: two seeds) draw different waits for the same failures."""
    def waits(seed: int) -> list[float]:
        clock = FakeClock()

        def call():
            raise HTTPStatusError(429)

        with pytest.raises(HTTPStatusError):
            call_with_retries(call, "x", RetryPolicy(attempts=8), sleep=clock.sleep, clock=clock,
                              rng=random.Random(seed))
        return clock.waits

    first, second = waits(1), waits(2)
    ceilings = [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    for drawn in (first, second):
        assert len(drawn) == 7 and all(0.0 <= w <= c for w, c in zip(drawn, ceilings))
    assert first != second


@pytest.mark.parametrize("seed", range(20))
def test_no_retry_starts_that_cannot_end_before_the_deadline(seed):
    """With a fake clock and attempts of random length (each failing with 503 or a 429 with Retry-After), a call with a
    deadline of 10 s never runs past it: every retry's wait plus an attempt as long as the last one ends in time, so
    the whole call (attempts of equal length) ends within 10 s, and the give-up says how long it took."""
    draw = random.Random(seed)
    clock = FakeClock()
    took = draw.uniform(0.01, 3.0)

    def call():
        clock.now += took
        raise HTTPStatusError(429, {"Retry-After": "1"}) if draw.random() < 0.5 else HTTPStatusError(503)

    with pytest.raises(HTTPStatusError) as raised:
        call_with_retries(call, "x", RetryPolicy(attempts=50, deadline_s=10.0), sleep=clock.sleep, clock=clock,
                          rng=random.Random(seed))
    assert clock.now <= 10.0 + 1e-9
    assert raised.value.fwe_retry_s == pytest.approx(clock.now)


def _failing_call(clock: FakeClock, took: float = 0.5):
    def call():
        clock.now += took
        raise HTTPStatusError(503)

    return call


def test_a_loaders_scope_bounds_its_calls_and_its_observer_hears_each_retry():
    """Inside a scope (a loader's: its --timeout as budget, its heartbeat as observer) every retried call ends within
    the budget, whatever the enclosing scope's; each retry reaches the observer as {what, attempt, reason, wait_s};
    outside the scope there is no budget."""
    events: list[dict] = []
    with scoped(RetryScope(lambda e: None, budget_s=100.0)), scoped(RetryScope(events.append, budget_s=4.0)):
        assert hub_budget_s() == 4.0
        clock = FakeClock()
        with pytest.raises(HTTPStatusError):
            call_with_retries(_failing_call(clock), "reading y", RetryPolicy(attempts=50), sleep=clock.sleep,
                              clock=clock, rng=Ceiling())
        assert clock.now <= 4.0
    assert [(e["what"], e["attempt"], e["reason"]) for e in events] == [
        ("reading y", n, "HTTP 503") for n in range(1, len(events) + 1)]
    assert [e["wait_s"] for e in events] == pytest.approx(clock.waits, abs=1e-3) and events
    assert hub_budget_s() is None


def test_two_loaders_scopes_bound_and_report_only_their_own_calls():
    """Two loaders' calls at once, each on a thread in its own scope (budgets 1 s and 60 s): the 60 s loader's call
    retries past the other's budget (a 503 with Retry-After 2 s is waited for, not given up on), the 1 s loader's
    gives up at once, and each observer hears only its own loader's retries."""
    heard: dict[str, list[dict]] = {"short": [], "long": []}
    results: dict[str, object] = {}
    both_in = threading.Barrier(2)

    def load(name: str, budget_s: float) -> None:
        clock = FakeClock()
        answers = [HTTPStatusError(503, {"Retry-After": "2"}), "rows"]

        def call():
            clock.now += 0.01
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

        with scoped(RetryScope(heard[name].append, budget_s=budget_s)):
            both_in.wait()  # both scopes are live while either call runs
            try:  # the long call's summary warning is left to pytest (catch_warnings is not for threads)
                results[name] = call_with_retries(call, f"reading {name}", sleep=clock.sleep, clock=clock, rng=Floor())
            except HTTPStatusError as exc:
                results[name] = exc

    threads = [threading.Thread(target=load, args=args) for args in (("short", 1.0), ("long", 60.0))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results["long"] == "rows" and isinstance(results["short"], HTTPStatusError)
    assert [e["what"] for e in heard["long"]] == ["reading long"] and heard["short"] == []


def test_work_started_before_its_loader_is_handed_to_it():
    """A scope without an observer (work started before its loader exists: the `fwe` process's early start) keeps
    its retries; once handed to a loader's scope they reach that loader's observer, later ones too, and the work's
    calls are bounded by that loader's budget."""
    early, heard = RetryScope(), []
    with scoped(early):
        assert retry_wait(HTTPStatusError(503), 1, 0.0, "listing", clock=FakeClock(), rng=Floor()) == 0.0
    assert early.budget_s is None
    early.hand_to(RetryScope(heard.append, budget_s=5.0))
    assert early.budget_s == 5.0 and [e["what"] for e in heard] == ["listing"]
    with scoped(early):
        clock = FakeClock()
        clock.now = 6.0  # past the loader's budget: no retry starts
        assert retry_wait(HTTPStatusError(503), 2, 0.0, "listing", clock=clock, rng=Floor()) is None
        assert retry_wait(HTTPStatusError(503), 1, 6.0, "footer", clock=clock, rng=Floor()) == 0.0
    assert [(e["what"], e["attempt"]) for e in heard] == [("listing", 1), ("footer", 1)]


def test_retry_wait_reports_nothing_and_notes_the_attempts_when_it_gives_up():
    """retry_wait (what bootstrap's download loop calls) returns None for a permanent error or the last attempt,
    tells no observer, and leaves the attempts on the exception for the error line."""
    events: list[dict] = []
    with scoped(RetryScope(events.append)):
        clock = FakeClock()
        assert retry_wait(HTTPStatusError(404), 1, 0.0, "x", clock=clock) is None
        last = HTTPStatusError(503)
        clock.now = 7.0
        assert retry_wait(last, THREE.attempts, 0.0, "x", THREE, clock=clock) is None
    assert attempts_note(last) == " after 3 attempts over 7.0 s" and events == []


@pytest.mark.parametrize("fields, message", [
    ({"attempts": 0}, "attempts must be >= 1"), ({"base_wait_s": 5.0, "max_wait_s": 1.0}, "base_wait_s <= max_wait_s"),
    ({"deadline_s": 0.0}, "deadline_s must be > 0")])
def test_policy_refuses_nonsense(fields, message):
    """A policy that could never retry sensibly is refused when it is made, naming the field."""
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**fields)

"""fwe_cli.loader.transient: which Hub failures are retried, how long it waits, and what it reports when it gives up.
(End to end against the test Hub: test_hub_smoke.py's 503/drop test.)"""

from __future__ import annotations

import warnings

import pytest

from fwe_cli.loader.transient import attempts_note, call_with_retries, transient_reason, unreachable_reason


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


def test_retries_transient_failures_with_backoff_and_one_summary_line():
    """Two 503s then success: three calls, waits of 1 s and 2 s, the result returned, and ONE warning at the end
    summing up the attempts, the seconds and the reasons (no line per retry)."""
    outcomes = [HTTPStatusError(503), HTTPStatusError(503), "ok"]
    clock = FakeClock()

    def call():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with pytest.warns(RuntimeWarning) as warned:
        assert call_with_retries(call, "opening x", sleep=clock.sleep, clock=clock) == "ok"
    assert clock.waits == [1.0, 2.0]
    assert [str(w.message) for w in warned] == [
        "fwe: opening x succeeded after 3 attempts over 3.0 s (retried: HTTP 503, HTTP 503)"]


def test_retry_after_is_honoured_up_to_a_cap():
    """A 429 with Retry-After 5 waits 5 s, not the 1 s backoff; an absurd Retry-After is capped at 30 s."""
    for header, expected in (("5", 5.0), ("3600", 30.0)):
        outcomes = [HTTPStatusError(429, {"Retry-After": header}), "ok"]
        waits: list[float] = []

        def call():
            outcome = outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        with pytest.warns(RuntimeWarning):
            call_with_retries(call, "x", sleep=waits.append)
        assert waits == [expected]


def test_gives_up_after_attempts_and_says_so_in_the_error_only():
    """Always 503: the last exception is raised after 3 calls with no warning line; attempts_note (for the
    caller's one error line) reports the attempts and the seconds they took."""
    calls = []
    clock = FakeClock()

    def call():
        calls.append(1)
        raise HTTPStatusError(503)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(HTTPStatusError, match="^HTTP 503$") as raised:
            call_with_retries(call, "x", sleep=clock.sleep, clock=clock)
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
        assert call_with_retries(flaky, "x", sleep=clock.sleep, clock=clock, fail_fast=True) == "ok"
    assert clock.waits == [1.0]


def test_permanent_errors_are_not_retried():
    """A 404 is raised at once: one call, no wait, no note."""
    waits: list[float] = []

    def call():
        raise HTTPStatusError(404)

    with pytest.raises(HTTPStatusError, match="^HTTP 404$") as raised:
        call_with_retries(call, "x", sleep=waits.append)
    assert waits == [] and attempts_note(raised.value) == ""

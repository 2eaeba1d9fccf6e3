"""fwe_cli.loader.transient: which Hub failures are retried, how long it waits, and what it reports when it gives up.
(End to end against the test Hub: test_hub_smoke.py's 503/drop test.)"""

from __future__ import annotations

import pytest

from fwe_cli.loader.transient import attempts_note, call_with_retries, transient_reason


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


def test_retries_transient_failures_with_backoff():
    """Two 503s then success: three calls, waits of 1 s and 2 s, a warning per retry, the result returned."""
    outcomes = [HTTPStatusError(503), HTTPStatusError(503), "ok"]
    waits: list[float] = []

    def call():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with pytest.warns(RuntimeWarning) as warned:
        assert call_with_retries(call, "opening x", sleep=waits.append) == "ok"
    assert waits == [1.0, 2.0]
    assert [str(w.message) for w in warned] == ["fwe: opening x failed (HTTP 503); retry 1/2 in 1 s",
                                                "fwe: opening x failed (HTTP 503); retry 2/2 in 2 s"]


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


def test_gives_up_after_attempts_and_says_so():
    """Always 503: the last exception is raised after 3 calls, and attempts_note reports them."""
    calls = []

    def call():
        calls.append(1)
        raise HTTPStatusError(503)

    with pytest.warns(RuntimeWarning), pytest.raises(HTTPStatusError, match="^HTTP 503$") as raised:
        call_with_retries(call, "x", sleep=lambda s: None)
    assert len(calls) == 3
    assert attempts_note(raised.value) == " after 3 attempts"


def test_permanent_errors_are_not_retried():
    """A 404 is raised at once: one call, no wait, no note."""
    waits: list[float] = []

    def call():
        raise HTTPStatusError(404)

    with pytest.raises(HTTPStatusError, match="^HTTP 404$") as raised:
        call_with_retries(call, "x", sleep=waits.append)
    assert waits == [] and attempts_note(raised.value) == ""

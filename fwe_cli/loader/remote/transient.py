"""Retry a Hub call that failed for a transient reason: HTTP 408/429/5xx, a cut or refused connection, a timeout.

A cold start is where a busy Hub answers 503, and huggingface_hub retries only some requests, so every Hub request
fwe sends (listing, range reads, bootstrap's downloads, the tokenizer fetch) goes through one policy, `HUB_RETRY`.
Before retry n it waits a uniform draw from [0, min(max_wait_s, base_wait_s * 2**(n-1))] (full jitter, seeded per
process so that ranks refused together do not return together), or a Retry-After in full plus jitter. A retry starts
only if it can end before the policy's deadline and the budget of the loader whose call it is.

Whose call it is: a loader runs its work in a `RetryScope` (its budget, its observer for `fineweb_hub_retry`
heartbeats); threads it starts inherit the scope through contextvars, so a call on any of them finds its loader and
no other. Outside a scope (bootstrap, a test) a call has only the policy's deadline. A call that recovers warns once;
one that gives up raises its last exception, `attempts_note(exc)` adding the attempts to the caller's error line;
`fail_fast=True` gives an unreachable Hub's error at once. Errors are classified by duck typing over the exception
chain (no HTTP library imported here); offline mode (HF_HUB_OFFLINE) is never retried.
"""

from __future__ import annotations

import os
import random
import threading
import time
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
TRANSPORT_ERRORS = frozenset({"TransportError", "NetworkError", "RemoteProtocolError", "TimeoutException",
                              "ProtocolError", "ChunkedEncodingError", "IncompleteRead"})
# Not transient, whichever client raises it (fwe's http.TooManyRedirects, httpx's or requests' TooManyRedirects, none
# of them a ConnectionError): a redirect chain that does not end. The server answered, and asking again gets the
# same chain, so a retry only delays the error by the whole backoff.
# The server was never reached (refused, DNS, no route, connect timeout) or never answered (read timeout).
UNREACHABLE_ERRORS = frozenset({"ConnectError", "ConnectTimeout", "ReadTimeout", "PoolTimeout", "TimeoutException",
                                "NewConnectionError", "NameResolutionError", "gaierror", "ConnectionRefusedError"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a failed Hub request is retried."""

    attempts: int = 6
    """Calls at most (the first included)."""
    base_wait_s: float = 1.0
    """The backoff's first ceiling: retry n waits up to base_wait_s * 2**(n-1)."""
    max_wait_s: float = 30.0
    """No single wait is longer (a larger Retry-After is cut to it: the deadline rules anyway)."""
    deadline_s: float | None = None
    """No retry that could not end within this many seconds of the first call starts (None: only the loader's
    budget, if one is registered, bounds it)."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts!r}")
        if not 0 <= self.base_wait_s <= self.max_wait_s:
            raise ValueError(f"need 0 <= base_wait_s <= max_wait_s, got {self.base_wait_s!r}, {self.max_wait_s!r}")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise ValueError(f"deadline_s must be > 0 or None, got {self.deadline_s!r}")

    def backoff_s(self, attempt: int) -> float:
        """The ceiling of the jittered wait after failed attempt `attempt` (1 = the first call)."""
        return min(self.max_wait_s, self.base_wait_s * 2 ** (attempt - 1))


HUB_RETRY = RetryPolicy()
"""The one policy of every Hub request fwe sends."""


# -- whose calls these are: one loader's budget and observer --------------------------------------------------------
class RetryScope:
    """One loader's Hub calls: `budget_s` bounds each retried call (its --timeout; None: the policy's deadline only)
    and `observer` is told of each retry ({what, attempt, reason, wait_s}).

    Work started before its loader exists (the `fwe` process's early start: a listing, a tokenizer download) runs in
    a scope without an observer, which keeps its retries until the loader that takes the work over adopts it
    (`hand_to`): they are reported to that loader then, later ones as they come, and the budget is the loader's."""

    def __init__(self, observer: Callable[[dict], None] | None = None, budget_s: float | None = None):
        self._observer, self._budget_s = observer, budget_s
        self._owner: RetryScope | None = None
        self._held: list[dict] = []
        self._lock = threading.Lock()

    @property
    def budget_s(self) -> float | None:
        owner = self._owner
        return owner.budget_s if owner is not None else self._budget_s

    def report(self, event: dict) -> None:
        with self._lock:
            owner, observer = self._owner, self._observer
            if owner is None and observer is None:
                self._held.append(event)
                return
        (owner.report if owner is not None else observer)(event)  # type: ignore[operator]

    def hand_to(self, owner: RetryScope | None) -> None:
        """The work in this scope is `owner`'s from now on (nothing when `owner` is None or this scope)."""
        if owner is None or owner is self:
            return
        with self._lock:
            self._owner, held, self._held = owner, self._held, []
        for event in held:
            owner.report(event)


_scope: ContextVar[RetryScope | None] = ContextVar("fwe_retry_scope", default=None)


@contextmanager
def scoped(scope: RetryScope) -> Iterator[RetryScope]:
    """Run the block's Hub calls, and those of the threads it starts in a copy of its context, in `scope`."""
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def current_scope() -> RetryScope | None:
    """The scope the calling code runs in (its loader's), None outside any."""
    return _scope.get()


def work_scope() -> RetryScope:
    """The scope for work started now to be taken over later: the caller's, or, outside any (work started before its
    loader exists), a new one for the loader that takes the work over to adopt (`RetryScope.hand_to`)."""
    return _scope.get() or RetryScope()


def hub_budget_s() -> float | None:
    """The budget of the loader whose work calls (its --timeout), None outside any loader's scope."""
    scope = _scope.get()
    return scope.budget_s if scope is not None else None


_rng_state: dict[str, object] = {}
_rng_lock = threading.Lock()


def _process_rng() -> random.Random:
    """The jitter's generator, seeded anew in each process (a forked child gets its own, not a copy)."""
    with _rng_lock:
        if _rng_state.get("pid") != os.getpid():
            seed = f"{os.getpid()}:{os.environ.get('RANK', '')}:{os.urandom(8).hex()}"
            _rng_state.update(pid=os.getpid(), rng=random.Random(seed))
        return _rng_state["rng"]  # type: ignore[return-value]


# -- classification -------------------------------------------------------------------------------------------------
def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen and len(seen) < 16:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _is_offline(e: BaseException) -> bool:
    return any(k.__name__ == "OfflineModeIsEnabled" for k in type(e).__mro__)


def transient_reason(exc: BaseException) -> tuple[str, float | None] | None:
    """(reason, Retry-After seconds or None) when `exc` (or its chain) is worth retrying, else None."""
    chain = list(_chain(exc))
    if any(_is_offline(e) for e in chain):
        return None
    for e in chain:
        response = getattr(e, "response", None)
        status = getattr(response, "status_code", None)
        if status in TRANSIENT_STATUS:
            retry_after = None
            try:
                retry_after = float(response.headers.get("Retry-After"))
            except (AttributeError, TypeError, ValueError):
                pass
            return f"HTTP {status}", retry_after
        names = {k.__name__ for k in type(e).__mro__}
        if names & TRANSPORT_ERRORS or isinstance(e, (ConnectionError, TimeoutError)):
            return type(e).__name__, None
    return None


def unreachable_reason(exc: BaseException) -> str | None:
    """'TYPE: message' of the error in `exc`'s chain saying the server was never reached or never answered
    (offline mode included), else None. An HTTP status (an answer) or a cut connection is not 'unreachable'."""
    for e in _chain(exc):
        if _is_offline(e):
            return f"{type(e).__name__}: {e}"
        if getattr(getattr(e, "response", None), "status_code", None) is not None:
            return None
        names = {k.__name__ for k in type(e).__mro__}
        if names & UNREACHABLE_ERRORS or isinstance(e, (ConnectionRefusedError, TimeoutError)):
            return f"{type(e).__name__}: {e}".rstrip(": ")
    return None


# -- the policy at work ---------------------------------------------------------------------------------------------
def retry_wait(exc: BaseException, attempt: int, started: float, what: str, policy: RetryPolicy = HUB_RETRY, *,
               attempt_s: float = 0.0, fail_fast: bool = False, clock: Callable[[], float] = time.monotonic,
               rng: random.Random | None = None) -> float | None:
    """Seconds to wait before retrying `what`, whose attempt number `attempt` (1 = the first call; `attempt_s` long)
    ended in `exc`, the call having started at `started` (on `clock`); the retry is reported to the caller's scope.
    None when it is not to be retried (not transient, unreachable with `fail_fast`, attempts spent, or no retry
    would end before the deadline): `exc` then carries `fwe_attempts` and `fwe_retry_s` for `attempts_note`."""
    found = transient_reason(exc)
    scope = _scope.get()
    now = clock()
    wait = None
    if found is not None and attempt < policy.attempts and not (fail_fast and unreachable_reason(exc)):
        reason, retry_after = found
        floor = min(retry_after or 0.0, policy.max_wait_s)
        wait = floor + (rng or _process_rng()).uniform(0.0, policy.backoff_s(attempt))
        limits = [d for d in (policy.deadline_s, scope and scope.budget_s) if d is not None]
        if limits:
            room = started + min(limits) - now - attempt_s  # the latest a retry may start, from now
            wait = min(wait, room) if room >= floor else None
    if wait is None:
        exc.fwe_attempts = attempt  # type: ignore[attr-defined]
        exc.fwe_retry_s = now - started  # type: ignore[attr-defined]
        return None
    if scope is not None:
        scope.report({"what": what, "attempt": attempt, "reason": reason, "wait_s": round(wait, 6)})
    return wait


def call_with_retries(fn: Callable[[], T], what: str, policy: RetryPolicy = HUB_RETRY,
                      sleep: Callable[[float], None] = time.sleep, *, fail_fast: bool = False,
                      clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None) -> T:
    """Call `fn`; on a transient failure wait as `retry_wait` says and call it again.

    The last exception is raised as is once `retry_wait` gives up, or at once on any other error, with
    `fwe_attempts` (calls made) and `fwe_retry_s` (seconds since the first call) set on it. A call that succeeds
    after retries warns once, at the end."""
    start = clock()
    reasons: list[str] = []
    attempt = 0
    while True:
        attempt += 1
        began = clock()
        try:
            result = fn()
        except Exception as exc:
            wait = retry_wait(exc, attempt, start, what, policy, attempt_s=clock() - began, fail_fast=fail_fast,
                              clock=clock, rng=rng)
            if wait is None:
                raise
            reasons.append(transient_reason(exc)[0])  # type: ignore[index]
            sleep(wait)
            continue
        if reasons:
            warnings.warn(f"fwe: {what} succeeded after {attempt} attempts over {clock() - start:.1f} s "
                          f"(retried: {', '.join(reasons)})", RuntimeWarning, stacklevel=2)
        return result


def attempts_note(exc: BaseException) -> str:
    """' after N attempts over S s' when a call was retried, else ''."""
    n = getattr(exc, "fwe_attempts", 1)
    if n <= 1:
        return ""
    seconds = getattr(exc, "fwe_retry_s", None)
    return f" after {n} attempts" + (f" over {seconds:.1f} s" if seconds is not None else "")

"""Retry a Hub call that failed for a transient reason: HTTP 408/429/5xx, a cut or refused connection, a timeout.

huggingface_hub retries some requests itself (HEAD of a file, parquet range reads) but not all: measured
against the test Hub server (tests/hubsim), one 503 on the GET of README.md, on the GET of
/api/datasets/{repo}/revision/{sha} or on the GET of tokenizer.json, or one cut connection on the revision
info, made `load_dataset(..., streaming=True)` / `hf_hub_download` fail outright. The loader's cold start
is exactly where a busy Hub answers 503, so the opening calls go through `call_with_retries`.

Retries are quiet: a call that recovers reports one summary warning line (attempts, seconds, reasons); a call
that gives up raises its last exception, and `attempts_note(exc)` (' after 3 attempts over 3.0 s') goes into
the caller's one error line. A caller with a way out of a Hub that cannot be reached at all (refused
connection, DNS failure, no answer within the client's timeout: `unreachable_reason`) passes `fail_fast=True`
and gets that error at once instead of after the backoff.

Errors are classified by duck typing over the exception chain (a `response.status_code`, class names of
httpx/httpx2/requests transport errors, builtin ConnectionError/TimeoutError), so no HTTP library is
imported here. Offline mode (HF_HUB_OFFLINE) is never retried.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable, TypeVar

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
TRANSPORT_ERRORS = frozenset({"TransportError", "NetworkError", "RemoteProtocolError", "TimeoutException",
                              "ProtocolError", "ChunkedEncodingError", "IncompleteRead"})
# The server was never reached (refused, DNS, no route, connect timeout) or never answered (read timeout).
UNREACHABLE_ERRORS = frozenset({"ConnectError", "ConnectTimeout", "ReadTimeout", "PoolTimeout", "TimeoutException",
                                "NewConnectionError", "NameResolutionError", "gaierror", "ConnectionRefusedError"})
MAX_RETRY_AFTER_S = 30.0  # a Retry-After above this is not honoured in full: the loader timeout rules anyway


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


def call_with_retries(fn: Callable[[], T], what: str, attempts: int = 3, base_wait_s: float = 1.0,
                      sleep: Callable[[float], None] = time.sleep, *, fail_fast: bool = False,
                      clock: Callable[[], float] = time.monotonic) -> T:
    """Call `fn`; on a transient failure wait (1 s, 2 s, ...; at least Retry-After) and call it again.

    After `attempts` calls, or on any other error, the last exception is raised as is, with `fwe_attempts`
    (calls made) and `fwe_retry_s` (seconds since the first call) set on it. With `fail_fast`, an error for which
    `unreachable_reason` holds is raised at once. A call that succeeds after retries warns once, at the end."""
    start = clock()
    reasons: list[str] = []
    for attempt in range(1, attempts + 1):
        try:
            result = fn()
        except Exception as exc:
            found = transient_reason(exc)
            if found is None or attempt == attempts or (fail_fast and unreachable_reason(exc)):
                exc.fwe_attempts = attempt  # type: ignore[attr-defined]
                exc.fwe_retry_s = clock() - start  # type: ignore[attr-defined]
                raise
            reason, retry_after = found
            reasons.append(reason)
            sleep(max(base_wait_s * 2 ** (attempt - 1), min(retry_after or 0.0, MAX_RETRY_AFTER_S)))
            continue
        if reasons:
            warnings.warn(f"fwe: {what} succeeded after {attempt} attempts over {clock() - start:.1f} s "
                          f"(retried: {', '.join(reasons)})", RuntimeWarning, stacklevel=2)
        return result
    raise AssertionError("unreachable")  # pragma: no cover


def attempts_note(exc: BaseException) -> str:
    """' after N attempts over S s' when a call was retried, else ''."""
    n = getattr(exc, "fwe_attempts", 1)
    if n <= 1:
        return ""
    seconds = getattr(exc, "fwe_retry_s", None)
    return f" after {n} attempts" + (f" over {seconds:.1f} s" if seconds is not None else "")

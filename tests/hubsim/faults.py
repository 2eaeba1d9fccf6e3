"""Faults the test Hub server injects, switchable per run (`HubServer.set_faults`).

Each fault applies to requests whose "METHOD /path?query[ range=bytes=A-B]" matches its regular expression
(searched, so 'parquet' matches any parquet request, 'range=bytes=4-' the parquet data read after the
footer, '' every request):

- delay_s: every request waits this long before its answer is written (server think time).
- fail_count x fail_status: the first N matching requests are answered with that status (503, 429, ...)
  and, when retry_after is set, a `Retry-After: <seconds>` header; later ones succeed. With
  fail_distinct, a retried request is not failed twice, so the N failures hit N different requests.
- drop_after_bytes: the first drop_count matching requests that have a body get their headers and this
  many body bytes, then the connection is cut (the client sees a short read).
- stall_match: matching requests are never answered (until the server stops): a hung Hub.
- burst_every x burst_delay_s: about one in burst_every of the distinct requests matching burst_match waits
  burst_delay_s more before its answer: a bursty Hub where some reads (say, some row groups' range reads) come late
  while the others do not. Which ones is fixed by the request line (a hash of it), not by arrival order, so every
  run reading the same data meets the same late row groups, however many runs came before it.
- hangup_match: matching requests are answered, then their connection is closed without a `Connection: close`
  header: the client keeps a connection the server has closed (a keep-alive that ran out while it sat idle).
- unanswered_count: the first N requests matching unanswered_match are read and their connection closed without an
  answer (a kept-alive connection the server closed just as the request went out).
- redirect_match x redirect_to: matching requests are answered 302 to redirect_to + the same path (a CDN: another
  server, e.g. a second HubServer on the same root); a resolve request's 302 carries the file's Hub headers
  (X-Repo-Commit, ETag, X-Linked-*) as the Hub's redirect to its CDN does. redirect_to "" sends the request back to
  the same path on this server, without those headers: a redirect loop.
- sign_ttl_s: with redirect_match, a resolve's 302 leads to a signed CDN URL valid this long (tests/hubsim/cdn.py:
  the Hub's real redirect): redirect_to + /cdn/..., or with redirect_to "" a relative Location, this server's own
  /cdn/. The CDN (any server) refuses it with 403 once expired, or tampered.
- refuse_ranges: this server's /cdn/ answers a Range request with the whole file (200), as a host that does not
  serve ranges.

Added round-trip time is not here: it is the TCP proxy's job (proxy.py), because it costs per connection
and per exchange, not per request handled.
"""

from __future__ import annotations

import re
import threading
import zlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Faults:
    """What to inject; the default injects nothing."""

    delay_s: float = 0.0
    """Seconds added before every answer."""
    fail_count: int = 0
    """How many matching requests get `fail_status` before requests succeed again."""
    fail_status: int = 503
    """Status of the failed answers (503 and 429 are what the Hub sends under load)."""
    retry_after: int | None = None
    """Seconds sent as Retry-After with failed answers; None sends no header."""
    fail_match: str = ""
    """Regex over 'METHOD /path?query[ range=bytes=A-B]' selecting the requests that may fail."""
    fail_distinct: bool = False
    """Fail each distinct request line at most once, so the N failures land on N different requests
    (a client's retry of a failed request then succeeds)."""
    drop_after_bytes: int | None = None
    """Cut the connection after this many body bytes; None never cuts."""
    drop_count: int = 1
    """How many matching answers are cut."""
    drop_match: str = ""
    """Regex selecting the answers that may be cut."""
    stall_match: str | None = None
    """Regex selecting requests that are never answered; None stalls nothing."""
    burst_every: int = 0
    """About one in this many distinct requests matching `burst_match` is late by `burst_delay_s`, always the same
    ones (0: none is)."""
    burst_delay_s: float = 0.0
    """Seconds a late (burst) answer waits, on top of `delay_s`."""
    burst_match: str = ""
    """Regex selecting the requests counted for bursts."""
    hangup_match: str | None = None
    """Regex selecting requests whose connection is closed after their answer, unannounced; None closes none."""
    unanswered_count: int = 0
    """How many matching requests get their connection closed instead of an answer."""
    unanswered_match: str = ""
    """Regex selecting the requests that may go unanswered."""
    redirect_match: str | None = None
    """Regex selecting requests answered with a redirect to `redirect_to`; None redirects none."""
    redirect_to: str = ""
    """Base URL the redirects lead to (the path stays); "" is this server: a loop."""
    sign_ttl_s: float | None = None
    """A resolve's redirect leads to a signed CDN URL valid this many seconds (None: to the same path)."""
    refuse_ranges: bool = False
    """This server's CDN paths ignore Range (the whole file, 200)."""

    def __post_init__(self) -> None:
        if self.delay_s < 0 or self.burst_delay_s < 0:
            raise ValueError(f"delay_s and burst_delay_s must be >= 0, got {self.delay_s!r}, {self.burst_delay_s!r}")
        if self.burst_every < 0:
            raise ValueError(f"burst_every must be >= 0, got {self.burst_every!r}")
        if self.fail_count < 0:
            raise ValueError(f"fail_count must be >= 0, got {self.fail_count!r}")
        if not 400 <= self.fail_status <= 599:
            raise ValueError(f"fail_status must be an HTTP error status (400-599), got {self.fail_status!r}")
        if self.retry_after is not None and self.retry_after < 0:
            raise ValueError(f"retry_after must be >= 0 seconds, got {self.retry_after!r}")
        if self.drop_after_bytes is not None and self.drop_after_bytes < 0:
            raise ValueError(f"drop_after_bytes must be >= 0, got {self.drop_after_bytes!r}")
        if self.drop_count < 0:
            raise ValueError(f"drop_count must be >= 0, got {self.drop_count!r}")
        if self.sign_ttl_s is not None and self.sign_ttl_s <= 0:
            raise ValueError(f"sign_ttl_s must be > 0 seconds or None, got {self.sign_ttl_s!r}")
        if self.unanswered_count < 0:
            raise ValueError(f"unanswered_count must be >= 0, got {self.unanswered_count!r}")
        for name in ("fail_match", "drop_match", "stall_match", "burst_match", "hangup_match", "unanswered_match",
                     "redirect_match"):
            pattern = getattr(self, name)
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{name} {pattern!r} is not a regular expression: {exc}") from None

    def describe(self) -> dict:
        """Only the faults that are switched on (for logs and the CLI banner)."""
        on: dict = {}
        if self.delay_s:
            on["delay_s"] = self.delay_s
        if self.fail_count:
            on["fail"] = {"count": self.fail_count, "status": self.fail_status, "retry_after": self.retry_after,
                          "match": self.fail_match, "distinct": self.fail_distinct}
        if self.drop_after_bytes is not None and self.drop_count:
            on["drop"] = {"after_bytes": self.drop_after_bytes, "count": self.drop_count, "match": self.drop_match}
        if self.stall_match is not None:
            on["stall"] = {"match": self.stall_match}
        if self.burst_every and self.burst_delay_s:
            on["burst"] = {"every": self.burst_every, "delay_s": self.burst_delay_s, "match": self.burst_match}
        if self.hangup_match is not None:
            on["hangup"] = {"match": self.hangup_match}
        if self.unanswered_count:
            on["unanswered"] = {"count": self.unanswered_count, "match": self.unanswered_match}
        if self.redirect_match is not None:
            on["redirect"] = {"match": self.redirect_match, "to": self.redirect_to or "itself"}
            if self.sign_ttl_s is not None:
                on["redirect"]["signed_ttl_s"] = self.sign_ttl_s
        if self.refuse_ranges:
            on["refuse_ranges"] = True
        return on


class FaultState:
    """The faults of the current run plus how many failures/cuts are still to be dealt (thread-safe)."""

    def __init__(self, faults: Faults = Faults()):
        self.faults = faults
        self._lock = threading.Lock()
        self._fails_left = faults.fail_count
        self._drops_left = faults.drop_count if faults.drop_after_bytes is not None else 0
        self._unanswered_left = faults.unanswered_count
        self._failed_lines: set[str] = set()
        self.released = threading.Event()
        """Set when these faults are replaced or the server stops: stalled requests then end."""

    def should_stall(self, request_line: str) -> bool:
        pattern = self.faults.stall_match
        return pattern is not None and re.search(pattern, request_line) is not None

    def should_hang_up(self, request_line: str) -> bool:
        pattern = self.faults.hangup_match
        return pattern is not None and re.search(pattern, request_line) is not None

    def take_unanswered(self, request_line: str) -> bool:
        """True (and one used up) when this request's connection is to be closed instead of answered."""
        with self._lock:
            if self._unanswered_left and re.search(self.faults.unanswered_match, request_line):
                self._unanswered_left -= 1
                return True
        return False

    def should_redirect(self, request_line: str) -> bool:
        pattern = self.faults.redirect_match
        return pattern is not None and re.search(pattern, request_line) is not None

    def burst_delay(self, request_line: str) -> float:
        """Seconds this request is to be late: burst_delay_s for a matching one whose line hashes to 0 modulo
        burst_every (crc32: the same lines on every run and platform), else 0."""
        f = self.faults
        if not (f.burst_every and f.burst_delay_s) or re.search(f.burst_match, request_line) is None:
            return 0.0
        return f.burst_delay_s if zlib.crc32(request_line.encode()) % f.burst_every == 0 else 0.0

    def take_failure(self, request_line: str) -> bool:
        """True (and one failure used up) when this request is to be failed."""
        with self._lock:
            if self._fails_left and re.search(self.faults.fail_match, request_line):
                if self.faults.fail_distinct and request_line in self._failed_lines:
                    return False
                self._failed_lines.add(request_line)
                self._fails_left -= 1
                return True
        return False

    def drop_budget(self, request_line: str) -> int | None:
        """Body bytes after which this answer is to be cut, or None; the cut is only used up by
        `claim_drop`, when the body really is that long."""
        with self._lock:
            if self._drops_left and re.search(self.faults.drop_match, request_line):
                return self.faults.drop_after_bytes
        return None

    def claim_drop(self) -> bool:
        """Use up one cut; False when another answer took the last one meanwhile."""
        with self._lock:
            if self._drops_left:
                self._drops_left -= 1
                return True
        return False

    def remaining(self) -> dict:
        with self._lock:
            return {"fails": self._fails_left, "drops": self._drops_left, "unanswered": self._unanswered_left}

"""HTTP/1.1 to the Hub (and the CDN it redirects files to) over kept-alive connections, for the native reader's
listing and range reads and bootstrap's downloads: what huggingface_hub's client (httpx) does for them, without
importing it, which costs a cold start more CPU than its first round trips take.

    with request("GET", url, {"Range": "bytes=0-99"}, timeout=30) as answer:   # redirects followed
        answer.status, answer.headers["content-range"], answer.read(), answer.read(1 << 20)
    preconnect(url, 4)                   # open 4 connections to its host now, in the background

Connections are kept per (scheme, host, port) and handed to one request at a time; an answer read to its end puts
its connection back. Proxies come from the environment as urllib reads them (HTTPS through a CONNECT tunnel), the
Hub's token goes to the endpoint's host only, and TLS uses the system's certificates (or SSL_CERT_FILE /
REQUESTS_CA_BUNDLE). With HF_HUB_OFFLINE=1 nothing is sent (OfflineModeIsEnabled). Errors are the ones
fwe_cli/loader/transient.py classifies: HttpStatusError for 4xx/5xx (with the status and headers), ConnectError when
no connection could be made (refused, no address, no answer to the handshake), TimeoutError for an answer that does
not come, ConnectionError for one that is cut. A kept-alive connection the server had closed meanwhile is replaced
once without counting as a failure.
"""

from __future__ import annotations

import http.client
import os
import threading
from urllib.parse import urljoin, urlsplit

from fwe_cli.loader.hub_env import HttpStatusError, endpoint, note_request, offline, token

MAX_REDIRECTS = 5
CONNECT_TIMEOUT_S = 10.0
ERROR_BODY_BYTES = 64 * 1024  # an error answer's body is read (up to this) so its connection can serve again


class ConnectError(ConnectionError):
    """No connection to the server could be made (refused, no such host, no answer to the handshake)."""


class OfflineModeIsEnabled(ConnectionError):
    """HF_HUB_OFFLINE=1: no request is sent (named as huggingface_hub names it, which transient.py knows)."""


_idle: dict[tuple, list[http.client.HTTPConnection]] = {}
_lock = threading.Lock()
_tls = None


def _context():
    global _tls
    if _tls is None:
        import ssl

        cafile = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE") or None
        _tls = ssl.create_default_context(cafile=cafile)
    return _tls


def _route(scheme: str, host: str, port: int) -> tuple:
    """(scheme, host, port, proxy host, proxy port) of a connection to host:port, through the environment's proxy."""
    import urllib.request

    proxy = None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get(scheme)
    if not proxy:
        return scheme, host, port, None, None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return scheme, host, port, parts.hostname, parts.port or 80


def _new(key: tuple, timeout: float) -> http.client.HTTPConnection:
    scheme, host, port, proxy_host, proxy_port = key
    if proxy_host is None:
        conn = (http.client.HTTPSConnection(host, port, timeout=timeout, context=_context()) if scheme == "https"
                else http.client.HTTPConnection(host, port, timeout=timeout))
    elif scheme == "https":
        conn = http.client.HTTPSConnection(proxy_host, proxy_port, timeout=timeout, context=_context())
        conn.set_tunnel(host, port)
    else:
        conn = http.client.HTTPConnection(proxy_host, proxy_port, timeout=timeout)
    try:
        conn.connect()
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        if isinstance(exc, TimeoutError):
            raise ConnectError(f"no answer from {host}:{port} within {timeout:g} s while connecting") from exc
        raise ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
    return conn


def _key(url: str) -> tuple[tuple, str]:
    parts = urlsplit(url)
    scheme = parts.scheme or "http"
    port = parts.port or (443 if scheme == "https" else 80)
    key = _route(scheme, parts.hostname or "", port)
    target = url if key[3] is not None and scheme == "http" else (parts.path or "/") + (
        f"?{parts.query}" if parts.query else "")
    return key, target


def _take(key: tuple, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
    """(a connection, whether it was kept from an earlier answer)."""
    with _lock:
        idle = _idle.get(key)
        conn = idle.pop() if idle else None
    if conn is not None:
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, True
    return _new(key, min(timeout, CONNECT_TIMEOUT_S)), False


def _give_back(key: tuple, conn: http.client.HTTPConnection) -> None:
    with _lock:
        _idle.setdefault(key, []).append(conn)


def preconnect(url: str, connections: int, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Open up to `connections` connections to `url`'s host now, on background threads, so the requests that follow
    find their handshakes done; a failure is left for those requests to meet."""
    key, _ = _key(url)
    with _lock:
        missing = connections - len(_idle.get(key, []))

    def connect() -> None:
        try:
            _give_back(key, _new(key, timeout))
        except ConnectError:
            pass

    for _ in range(max(0, missing)):
        threading.Thread(target=connect, name="fwe-hub-connect", daemon=True).start()


class Answer:
    """An answer being read: `status`, `headers` (names in lower case), `url` (after redirects), `read(n)`."""

    def __init__(self, key: tuple, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, url: str,
                 headers: dict[str, str]):
        self._key, self._conn, self._response, self.url = key, conn, response, url
        self.status = response.status
        self.headers = headers
        self.message = response.msg
        """The headers as received (case-insensitive `get`), for errors that read Retry-After."""

    def read(self, n: int | None = None) -> bytes:
        """The whole body (n None: ConnectionError when it is cut), or up to `n` bytes of it: fewer only at its end
        or where the connection was cut (b"" from then on; the caller compares with what it expected)."""
        try:
            data = self._response.read() if n is None else self._response.read(n)
        except http.client.IncompleteRead as exc:
            self.close(keep=False)
            raise ConnectionError(f"the answer from {self.url} was cut ({exc})") from exc
        except (OSError, http.client.HTTPException):
            self.close(keep=False)
            raise
        if self._response.isclosed():
            self.close()
        return data

    def close(self, keep: bool = True) -> None:
        """Done with the answer: its connection serves again when its body was read whole, else it is closed."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        response = self._response
        whole = response.isclosed() and not response.will_close and not response.length
        if keep and whole:
            _give_back(self._key, conn)
        else:
            conn.close()

    def __enter__(self) -> "Answer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _send(method: str, url: str, headers: dict[str, str], body: bytes | None, timeout: float) -> Answer:
    """One exchange, on a kept connection when there is one (again on a new one if the server had closed it)."""
    key, target = _key(url)
    for _ in range(2):
        conn, kept = _take(key, timeout)
        note_request()
        try:
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
            conn.close()
            if kept:
                continue  # the server closed the idle connection: not a failure of this request
            raise ConnectionError(f"{method} {url}: the server closed the connection ({exc})") from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            if isinstance(exc, OSError):
                raise
            raise ConnectionError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        return Answer(key, conn, response, url, {k.lower(): v for k, v in response.getheaders()})
    raise AssertionError("unreachable")


def request(method: str, url: str, headers: dict[str, str] | None = None, body: bytes | None = None,
            timeout: float = 30.0) -> Answer:
    """The answer to `method url` (redirects followed; the Hub's headers kept over a CDN's, as huggingface_hub
    does). HttpStatusError for 4xx/5xx, after reading its body so the connection serves again."""
    from fwe_cli import __version__

    if offline():
        raise OfflineModeIsEnabled(f"HF_HUB_OFFLINE=1: {method} {url} was not sent")
    hub_host = urlsplit(endpoint()).netloc
    secret = token()
    base = {"User-Agent": f"fwe/{__version__}", "Accept-Encoding": "identity", **(headers or {})}
    hub_headers = None
    for _ in range(MAX_REDIRECTS + 1):
        sent = dict(base)
        if secret and urlsplit(url).netloc == hub_host:
            sent["Authorization"] = f"Bearer {secret}"
        answer = _send(method, url, sent, body, timeout)
        if 300 <= answer.status < 400 and "location" in answer.headers:
            if hub_headers is None and "x-repo-commit" in answer.headers:
                hub_headers = answer.headers
            answer.read()
            answer.close()
            url = urljoin(url, answer.headers["location"])
            continue
        if hub_headers is not None:
            answer.headers = {**answer.headers, **{k: v for k, v in hub_headers.items() if k.startswith("x-")}}
        if answer.status >= 400:
            answer.read(ERROR_BODY_BYTES)
            answer.close()
            error = HttpStatusError(url, answer.status, answer.message, method)
            message = answer.headers.get("x-error-message")
            if message:
                error.args = (f"{error.args[0]}: {message}",)
            raise error
        return answer
    raise ConnectionError(f"more than {MAX_REDIRECTS} redirects from {method} {url}")

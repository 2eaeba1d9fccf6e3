"""HTTP to the Hub (and the CDN it redirects files to) for every request fwe sends itself: the native reader's
listing and range reads, bootstrap's downloads, the tokenizer fetch and `fwe doctor`'s HEAD. urllib3 does the
plumbing (kept-alive connections per host, proxies, TLS); this module adds the Hub's conventions and fwe's errors.

    with request("GET", url, {"Range": "bytes=0-99"}, timeout=30) as answer:   # redirects followed
        answer.status, answer.headers["content-range"], answer.read(), answer.read(1 << 20)
    head(url, timeout)                   # the Hub's headers of one HEAD
    preconnect(url, 4)                   # open 4 connections to its host now, in the background
    prepare()                            # urllib3 imported now, on this thread, before threads send requests

An answer read to its end gives its connection back to the pool. A kept-alive connection the server had closed
meanwhile is replaced by urllib3, before the request when it sees the close and by sending the request again on
another connection when the server closes it before answering, however many such connections the pool holds.
Proxies come from the environment as urllib reads them (no_proxy honoured; HTTPS through a CONNECT tunnel), TLS
uses the system's certificates (or SSL_CERT_FILE / REQUESTS_CA_BUNDLE), and the Hub's token goes to the endpoint's
host only: never to the host a redirect leads to. With HF_HUB_OFFLINE=1 nothing is sent (OfflineModeIsEnabled).

Errors are the ones transient.py classifies, urllib3's mapped onto them in one place (`_raise`): HttpStatusError
for 4xx/5xx (status and headers), ConnectError when no connection could be made (refused, no address, no handshake,
the proxy or TLS failing), TimeoutError for an answer that does not come, ConnectionError for one that is cut,
TooManyRedirects for a chain that does not end. urllib3 is imported by the first request, not with this module.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, NoReturn
from urllib.parse import urljoin, urlsplit

from fwe_cli.loader.remote.hub_env import endpoint, note_request, offline, token

MAX_REDIRECTS = 5
CONNECT_TIMEOUT_S = 10.0
ERROR_BODY_BYTES = 64 * 1024  # an error or redirect answer's body is read (up to this) so its connection serves again
POOL_CONNECTIONS = 16  # kept-alive connections per host (bootstrap's fetchers use 8 at once, plus footers and listing)


class ConnectError(ConnectionError):
    """No connection to the server could be made (refused, no such host, no answer to the handshake, proxy, TLS)."""


class OfflineModeIsEnabled(ConnectionError):
    """HF_HUB_OFFLINE=1: no request is sent (named as huggingface_hub names it, which transient.py knows)."""


class TooManyRedirects(Exception):
    """More than MAX_REDIRECTS redirects in a row. Not a ConnectionError: the server answered, and it would answer
    the same again (transient.py does not retry it; see TRANSPORT_ERRORS there)."""


class HttpStatusError(Exception):
    """4xx/5xx, with `response.status_code` and `.headers` as httpx has them (transient.py reads them)."""

    def __init__(self, url: str, status: int, headers, method: str = "HEAD"):
        super().__init__(f"HTTP {status} for {method} {url}")
        self.response = type("Response", (), {"status_code": status, "headers": headers})()


# -- the pools: one urllib3 manager per proxy (None: direct), built when first needed -------------------------------
_managers: dict[tuple, object] = {}
_lock = threading.Lock()


def _forget_pools() -> None:
    """In a forked child: pools of its own (the parent's kept connections are the parent's to use)."""
    global _lock
    _lock = threading.Lock()
    _managers.clear()


os.register_at_fork(after_in_child=_forget_pools)


def _stale_only_retry():
    """urllib3's Retry for one case only: the request met a connection the server closed before answering (urllib3
    then sends it again, on another connection: at most once per pooled connection). Every other failure is raised
    at once, for transient.py's policy (backoff, Retry-After, deadlines); statuses and redirects are left to us."""
    from urllib3.exceptions import ProtocolError
    from urllib3.util.retry import Retry

    class StaleConnections(Retry):
        def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
            closed = isinstance(error, ProtocolError) and any(isinstance(a, ConnectionError) for a in error.args)
            if not closed:
                raise error if error is not None else RuntimeError(f"unexpected retry of {method} {url}")
            return super().increment(method, url, response, error, _pool, _stacktrace)

    return StaleConnections(total=POOL_CONNECTIONS, redirect=False, status=0, allowed_methods=None,
                            respect_retry_after_header=False, raise_on_status=False)


def _proxy_for(url: str) -> str | None:
    """The environment's proxy for `url` (http_proxy / https_proxy, unless no_proxy names its host), or None."""
    import urllib.request

    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxy = urllib.request.getproxies().get(parts.scheme or "http")
    return (proxy if "://" in proxy else f"http://{proxy}") if proxy else None


def _manager(url: str):
    """The urllib3 PoolManager (or ProxyManager) that `url` goes through now. Every path here calls it before it
    imports anything from urllib3: a thread that imports a submodule first while another imports the package can
    deadlock (each holds the lock of the module the other needs)."""
    proxy = _proxy_for(url)
    cafile = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE") or None
    key = (proxy, cafile)
    with _lock:
        import urllib3

        manager = _managers.get(key)
        if manager is None:
            pools = {"maxsize": POOL_CONNECTIONS, "block": False, "ca_certs": cafile, "retries": _stale_only_retry()}
            if proxy is None:
                manager = urllib3.PoolManager(**pools)
            else:
                auth = urllib3.util.parse_url(proxy).auth
                manager = urllib3.ProxyManager(
                    proxy, proxy_headers=urllib3.make_headers(proxy_basic_auth=auth) if auth else None, **pools)
            _managers[key] = manager
    return manager


def prepare() -> None:
    """Ready the client for the Hub now, on this thread (urllib3 imported, the endpoint's pool manager made), for a
    process about to send its first requests from threads that start beside other slow imports: each request would
    wait for that import, which would share the processor with them."""
    if not offline():
        _manager(endpoint())


def _raise(exc: Exception, what: str, timeout: float, reading: bool = False) -> NoReturn:
    """Raise urllib3's exception `exc` (of `what`, 'GET URL'; `reading`: of an answer's body) as the error
    transient.py classifies, from `exc`; one that says nothing of the connection (a bad URL) as it is."""
    from urllib3 import exceptions as e

    reason = exc.reason if isinstance(exc, e.MaxRetryError) and exc.reason is not None else exc
    host = urlsplit(what.partition(" ")[2]).netloc
    if isinstance(reason, e.ReadTimeoutError):
        raise TimeoutError(f"{what}: no answer within {timeout:g} s") from exc
    if isinstance(reason, e.ProtocolError) or (reading and isinstance(reason, e.SSLError)):
        raise ConnectionError(f"{what}: the connection was cut ({reason})") from exc
    if isinstance(reason, e.ConnectTimeoutError) and not isinstance(reason, e.NewConnectionError):
        raise ConnectError(f"no answer from {host} within {min(timeout, CONNECT_TIMEOUT_S):g} s while connecting") \
            from exc
    if isinstance(reason, (e.NewConnectionError, e.ProxyError, e.SSLError)):  # refused, no address, proxy, TLS
        cause = reason.__cause__ if isinstance(reason, e.NewConnectionError) and reason.__cause__ else reason
        raise ConnectError(f"cannot connect to {host} ({type(cause).__name__}: {cause})") from exc
    raise exc


class Answer:
    """An answer being read: `status`, `headers` (names in lower case), `url` (after redirects), `read(n)`;
    `message`: the headers as received (case-insensitive `get`), for errors that read Retry-After."""

    def __init__(self, response, url: str, what: str, timeout: float):
        self._response, self.url, self._what, self._timeout = response, url, what, timeout
        self.status = response.status
        self.headers = {k.lower(): v for k, v in response.headers.items()}
        self.message = response.headers

    def read(self, n: int | None = None) -> bytes:
        """The whole body, or up to `n` bytes of it (fewer only at its end or where the connection was cut: the next
        read says so); ConnectionError when the connection is cut before the end, TimeoutError when the rest does not
        come. (Bodies come as sent: fwe asks for no content encoding.)"""
        from urllib3.exceptions import HTTPError

        try:
            return self._response.read(n)
        except HTTPError as exc:
            self.close()
            _raise(exc, self._what, self._timeout, reading=True)

    def close(self) -> None:
        """Done with the answer: its connection serves again when its body was read whole, else it is closed."""
        response, self._response = self._response, None
        if response is None:
            return
        if response.length_remaining == 0:
            response.read()  # the body's end (a HEAD's, or one read whole): gives the connection back
        response.close()  # a body not read to its end: the connection goes (urllib3 opens another when needed)
        response.release_conn()

    def __enter__(self) -> "Answer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _send(method: str, url: str, headers: dict[str, str], body: bytes | None, timeout: float) -> Answer:
    """One exchange (no redirect followed) on a kept-alive connection to `url`'s host when there is one."""
    from urllib3 import Timeout
    from urllib3.exceptions import HTTPError

    manager = _manager(url)
    what = f"{method} {url}"
    note_request(url)
    try:
        response = manager.urlopen(method, url, body=body, headers=headers, redirect=False, preload_content=False,
                                   decode_content=False, timeout=Timeout(connect=min(timeout, CONNECT_TIMEOUT_S),
                                                                         read=timeout))
    except HTTPError as exc:
        _raise(exc, what, timeout)
    return Answer(response, url, what, timeout)


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)


def request(method: str, url: str, headers: dict[str, str] | None = None, body: bytes | None = None,
            timeout: float = 30.0, follow: Callable[[str], bool] = lambda target: True) -> Answer:
    """The answer to `method url`, redirects followed (a HEAD ends at the Hub's own answer, the first carrying
    X-Repo-Commit, as huggingface_hub's HEAD does), except one to a URL `follow` refuses: that 3xx is the answer (its
    body unread, its `location` made absolute). The Hub's x-* headers are kept over a CDN's. HttpStatusError for
    4xx/5xx, after reading its body so the connection serves again."""
    from fwe_cli import __version__

    if offline():
        raise OfflineModeIsEnabled(f"HF_HUB_OFFLINE=1: {method} {url} was not sent")
    hub, secret = _origin(endpoint()), token()
    base = {"User-Agent": f"fwe/{__version__}", "Accept-Encoding": "identity", **(headers or {})}
    hub_headers = None
    for _ in range(MAX_REDIRECTS + 1):
        sent = dict(base)
        if secret and _origin(url) == hub:
            sent["Authorization"] = f"Bearer {secret}"
        answer = _send(method, url, sent, body, timeout)
        location = answer.headers.get("location") if 300 <= answer.status < 400 else None
        if location:
            location = answer.headers["location"] = urljoin(url, location)
            if not follow(location) or (method == "HEAD" and hub_headers is None and "x-repo-commit" in answer.headers):
                return answer
            hub_headers = hub_headers or (answer.headers if "x-repo-commit" in answer.headers else None)
            answer.read(ERROR_BODY_BYTES)
            answer.close()
            url = location
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
    raise TooManyRedirects(f"{method} {url}: more than {MAX_REDIRECTS} redirects")


def head(url: str, timeout: float) -> dict[str, str]:
    with request("HEAD", url, timeout=timeout) as answer:  # (the Hub's answer's: see request)
        return answer.headers


def preconnect(url: str, connections: int, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Have `connections` connections to `url`'s host open, the missing ones opened on background threads (urllib3's
    import too: this returns at once), so that the requests that follow find their handshakes done; a failure is
    left for those requests to meet."""
    if not offline():
        threading.Thread(target=_open, args=(url, connections, timeout), name="fwe-hub-connect", daemon=True).start()


def _open(url: str, connections: int, timeout: float) -> None:
    """preconnect's work. urllib3 has no public call for it: the pool's own _get_conn/_put_conn/_prepare_proxy do
    it, as its urlopen does."""
    try:
        pool = _manager(url).connection_from_url(url)
        from urllib3.util.proxy import connection_requires_http_tunnel  # (after _manager's import of urllib3)

        tunnel = pool.proxy is not None and connection_requires_http_tunnel(pool.proxy, pool.proxy_config,
                                                                            urlsplit(url).scheme)
        taken = [pool._get_conn() for _ in range(connections)]  # the idle ones first, then new (unopened) ones
    except Exception:  # noqa: BLE001 - a bad proxy setting, say: the requests meet it, with their own errors
        return

    def connect(conn) -> None:
        try:
            conn.timeout = timeout
            if tunnel:
                pool._prepare_proxy(conn)  # the CONNECT tunnel, then TLS through it
            else:
                conn.connect()
        except Exception:  # noqa: BLE001 - the requests meet it, with their own errors
            conn.close()
        finally:
            pool._put_conn(conn)

    for conn in taken:
        if conn.is_closed:
            threading.Thread(target=connect, args=(conn,), name="fwe-hub-connect", daemon=True).start()
        else:
            pool._put_conn(conn)

"""The test Hub server: serves a hubsim root read-only over HTTP/1.1 (keep-alive) on 127.0.0.1.

    with HubServer("/tmp/hub") as hub:          # ephemeral port
        os.environ["HF_ENDPOINT"] = hub.url      # before importing datasets / huggingface_hub
        hub.set_faults(Faults(fail_count=2, fail_match="parquet"))

Endpoints (what huggingface_hub 2.x and datasets 5.x call; pinned in tests/measure/test_hub_smoke.py and tests/hubsim/test_clients.py):

    GET  /api/agent-harnesses                                 {"standardEnvVars": [], "harnesses": {}}
    GET  /api/{datasets|models}/{repo}                        repo info at main
    GET  /api/{datasets|models}/{repo}/revision/{rev}         sha, siblings, cardData, ...
    GET  /api/{datasets|models}/{repo}/tree/{rev}[/{path}]    ?recursive=&expand=; path may be URL-encoded
    POST /api/{datasets|models}/{repo}/paths-info/{rev}       paths=[...]
    HEAD|GET /[datasets/]{repo}/resolve/{rev}/{file}          X-Repo-Commit, ETag, Content-Length; Range -> 206

Errors carry the Hub's X-Error-Code (RepoNotFound 401, RevisionNotFound 404, EntryNotFound 404 with
X-Repo-Commit, so clients cache the miss). Anything else is a 404 that the request log records.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

from tests.hubsim.faults import Faults, FaultState
from tests.hubsim.handler import HubHandler
from tests.hubsim.requestlog import RequestLog
from tests.hubsim.store import RepoStore


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    hub: "HubServer"

    def handle_error(self, request, client_address) -> None:
        """A client that goes away mid-connection (a process ending with a kept-alive connection or a read in
        flight resets it) is how clients end, not a server error: no traceback for it; anything else, as before."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def shutdown_request(self, request) -> None:
        super().shutdown_request(request)
        self.hub.connection_closed()


class HubServer:
    """The server plus its run state (faults, request log); serves on a daemon thread."""

    def __init__(self, root, host: str = "127.0.0.1", port: int = 0, faults: Faults = Faults(),
                 log_path=None, on_request=None):
        self.store = RepoStore(root)
        self.fault_state = FaultState(faults)
        self.on_request = on_request
        self.log = RequestLog(log_path, on_request)
        self.stopping = threading.Event()
        self._connections = 0
        self._conn_lock = threading.Lock()
        self._in_flight = 0
        self._idle = threading.Condition()
        self._closed = 0
        self._closing = threading.Condition()
        self._httpd = _Server((host, port), HubHandler)
        self._httpd.hub = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._httpd.server_address[0]}:{self.port}"

    def repo_ids(self) -> list[str]:
        return [repo_id for _, repo_id in self.store.list_repos()]

    def next_connection(self) -> int:
        with self._conn_lock:
            self._connections += 1
            return self._connections

    def request_started(self) -> None:
        with self._idle:
            self._in_flight += 1

    def request_ended(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    def connection_closed(self) -> None:
        with self._closing:
            self._closed += 1
            self._closing.notify_all()

    @property
    def closed_connections(self) -> int:
        """Connections the server has closed (its side), since it started."""
        with self._closing:
            return self._closed

    def wait_closed(self, count: int, timeout: float = 30.0) -> bool:
        """Wait until the server has closed `count` connections since it started; False if not within `timeout` (a
        generous bound: it only matters when something hangs)."""
        with self._closing:
            return self._closing.wait_for(lambda: self._closed >= count, timeout)

    @property
    def in_flight(self) -> int:
        """Requests being answered now (stalled ones excluded)."""
        with self._idle:
            return self._in_flight

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no request is being answered, i.e. every answer a client has seen is in the log (a
        client can see its answer a moment before the server logs it); stalled requests do not count.
        False if still busy after `timeout` (a generous bound: it only matters when a request hangs)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def flush(self) -> list[dict]:
        """The current log's records once every answered request is logged (wait_idle), arrival order."""
        self.wait_idle()
        return self.log.records()

    def set_faults(self, faults: Faults = Faults()) -> None:
        """Switch faults for the next requests (counters start afresh; stalled requests are released)."""
        old, self.fault_state = self.fault_state, FaultState(faults)
        old.released.set()

    def new_log(self, path=None) -> RequestLog:
        """Start a fresh request log (optionally mirrored to a JSON-lines file) and return it."""
        self.log = RequestLog(path, self.on_request)
        return self.log

    def start(self) -> "HubServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="hubsim-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release stalled requests, let answers in flight finish and be logged (the log is complete when
        stop returns), stop accepting, and close the socket."""
        self.stopping.set()
        self.fault_state.released.set()
        self.wait_idle(timeout=5.0)
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "HubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

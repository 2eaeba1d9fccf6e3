"""A TCP proxy on 127.0.0.1 that adds network round-trip time (this kernel has no netem).

    with RttProxy(("127.0.0.1", hub.port), rtt_s=0.05) as proxy:
        os.environ["HF_ENDPOINT"] = proxy.url

Model: every byte is held for rtt/2 in each direction (a delay line, so bandwidth is not throttled:
bytes sent back to back stay back to back), hence one request/answer exchange costs one RTT. A new
connection additionally cannot carry data until `handshake_rtts` round trips after it was accepted:
2 by default, the TCP handshake plus a TLS 1.3 handshake, as on https://huggingface.co. So with
rtt 50 ms the first answer on a new connection arrives >= 150 ms after connect, later answers on the
same keep-alive connection >= 50 ms after their request.

`bandwidth_bps` (optional) adds a link of that many bits per second in each direction, shared by every
connection: a chunk is sent once the link has carried the chunks booked before it (from any connection) plus
itself, then delayed by rtt/2. A reader books its chunk when it arrives, and stops reading while the link is
booked more than `MAX_BACKLOG_S` ahead, so a fast server is slowed down (as TCP's window would) instead of
being buffered here. So `RttProxy(..., rtt_s=0.05, bandwidth_bps=400e6)` is a 50 ms / 400 Mbit/s path.

`per_connection_bps` (optional) caps each connection instead, a link of its own in each direction, so parallel
connections add up (how a CDN serves: each connection is limited, more connections get more):
`RttProxy(..., rtt_s=0.05, per_connection_bps=400e6)`. Both may be given (each connection capped, all of them
sharing one link).
"""

from __future__ import annotations

import queue
import socket
import threading
import time

RECV = 64 * 1024
MAX_BACKLOG_S = 0.1


class Link:
    """One direction of a link of `bandwidth_bps` bits/s, shared by every connection (first come, first served)."""

    def __init__(self, bandwidth_bps: float):
        if not bandwidth_bps > 0:
            raise ValueError(f"bandwidth_bps must be > 0, got {bandwidth_bps!r}")
        self.seconds_per_byte = 8.0 / bandwidth_bps
        self._free_at = 0.0
        self._lock = threading.Lock()
        self.booked_bytes = 0  # the pacing record: bytes carried, from first_start to free_at (monotonic times)
        self.first_start: float | None = None

    @property
    def free_at(self) -> float:
        return self._free_at

    def book(self, ready: float, size: int) -> float:
        """When `size` bytes, ready at `ready`, have been carried (after every chunk booked before them)."""
        with self._lock:
            start = max(ready, self._free_at)
            self.first_start = start if self.first_start is None else self.first_start
            self._free_at = start + size * self.seconds_per_byte
            self.booked_bytes += size
            return self._free_at


class _DelayLine:
    """Reader thread stamps chunks on arrival; writer thread sends each at stamp + delay (FIFO)."""

    def __init__(self, src: socket.socket, dst: socket.socket, delay_s: float, not_before: float, name: str,
                 on_done, link: Link | None = None):
        self.src, self.dst, self.delay_s, self.not_before, self.link = src, dst, delay_s, not_before, link
        self._queue: queue.Queue = queue.Queue()
        self._on_done = on_done
        threading.Thread(target=self._read, name=f"{name}-read", daemon=True).start()
        threading.Thread(target=self._write, name=f"{name}-write", daemon=True).start()

    def _read(self) -> None:
        try:
            while chunk := self.src.recv(RECV):
                stamp = time.monotonic()
                if self.link is not None:
                    stamp = self.link.book(max(stamp, self.not_before), len(chunk))
                    backlog = stamp - time.monotonic() - MAX_BACKLOG_S
                    if backlog > 0:
                        time.sleep(backlog)  # the link is busy: stop reading, as a full TCP window would
                self._queue.put((stamp, chunk))
        except OSError:
            pass
        self._queue.put((time.monotonic(), b""))

    def _write(self) -> None:
        try:
            while True:
                stamp, chunk = self._queue.get()
                wait = max(stamp, self.not_before) + self.delay_s - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not chunk:
                    self.dst.shutdown(socket.SHUT_WR)
                    break
                self.dst.sendall(chunk)
        except OSError:
            pass
        self._on_done()


class RttProxy:
    """Forwards 127.0.0.1:<port> to `upstream`, adding `rtt_s` per exchange and per new connection (and, with
    `bandwidth_bps`, a shared link of that speed each way)."""

    def __init__(self, upstream: tuple[str, int], rtt_s: float, handshake_rtts: int = 2,
                 host: str = "127.0.0.1", port: int = 0, bandwidth_bps: float | None = None,
                 per_connection_bps: float | None = None):
        if rtt_s < 0 or handshake_rtts < 0:
            raise ValueError(f"rtt_s and handshake_rtts must be >= 0, got {rtt_s!r}, {handshake_rtts!r}")
        if per_connection_bps is not None and not per_connection_bps > 0:
            raise ValueError(f"per_connection_bps must be > 0, got {per_connection_bps!r}")
        self.upstream, self.rtt_s, self.handshake_rtts = upstream, rtt_s, handshake_rtts
        self.bandwidth_bps, self.per_connection_bps = bandwidth_bps, per_connection_bps
        self.links = (Link(bandwidth_bps), Link(bandwidth_bps)) if bandwidth_bps else (None, None)  # (up, down)
        self.connection_links: list[tuple[Link, Link]] = []  # with per_connection_bps: each connection's (up, down)
        self.connections = 0
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="hubsim-rtt-proxy", daemon=True)

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            accepted = time.monotonic()
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                number = self.connections
                self._open.update((client, server))
            ready = accepted + self.handshake_rtts * self.rtt_s
            done = _Countdown(2, lambda c=client, s=server: self._close_pair(c, s))
            half = self.rtt_s / 2
            up, down = self.links
            if self.per_connection_bps:
                own = (Link(self.per_connection_bps), Link(self.per_connection_bps))
                with self._lock:
                    self.connection_links.append(own)
                up, down = (_Capped(mine, shared) for mine, shared in zip(own, (up, down)))
            _DelayLine(client, server, half, ready, f"hubsim-rtt-{number}-up", done.tick, up)
            _DelayLine(server, client, half, 0.0, f"hubsim-rtt-{number}-down", done.tick, down)

    def _close_pair(self, *socks: socket.socket) -> None:
        with self._lock:
            for sock in socks:
                self._open.discard(sock)
                sock.close()

    def start(self) -> "RttProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=2)
        with self._lock:
            for sock in list(self._open):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._open.clear()

    def __enter__(self) -> "RttProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Capped:
    """A connection's own link, then (when there is one) the link every connection shares."""

    def __init__(self, own: Link, shared: Link | None):
        self.own, self.shared = own, shared

    def book(self, ready: float, size: int) -> float:
        done = self.own.book(ready, size)
        return max(done, self.shared.book(ready, size)) if self.shared else done


class _Countdown:
    def __init__(self, n: int, then):
        self._n, self._then, self._lock = n, then, threading.Lock()

    def tick(self) -> None:
        with self._lock:
            self._n -= 1
            fire = self._n == 0
        if fire:
            self._then()

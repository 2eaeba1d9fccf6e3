"""A real S3 server for the tests: moto's server mode (ThreadedMotoServer on 127.0.0.1), behind a fault layer that
answers chosen requests with 503 SlowDown, 500 InternalError, 403 AccessDenied or 301 PermanentRedirect (a bucket
of another region, its region not said: what botocore cannot follow), cuts a body short, or adds a
delay, and logs every request it forwards (method, path, Range) so a test can say what was read.

    with S3Sim() as s3:
        s3.bucket("data"); s3.put("data", "a.jsonl", b"...")
        monkeypatch.setattr(os, "environ", {**os.environ, **s3.env()})   # or fwe_env(**s3.env())
        s3.faults(Fault("GET", "a.jsonl", status=503, count=2))
        s3.requests("GET", "a.jsonl")  -> [(method, path, range), ...]
"""

from __future__ import annotations

import http.client
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CODES = {503: "SlowDown", 500: "InternalError", 403: "AccessDenied", 412: "PreconditionFailed",
         301: "PermanentRedirect"}


@dataclass
class Fault:
    """What the fault layer does to the first `count` requests of `method` whose path (with query) matches `path`."""

    method: str
    path: str
    status: int | None = None
    """Answer with this status and S3's error body (CODES) instead of forwarding."""
    cut_after: int | None = None
    """Forward, but send only this many bytes of the body, then close the connection."""
    count: int = 1
    delay_s: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and method == self.method and re.search(self.path, path) is not None


class _Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stall
    sim: "S3Sim"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                out += self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    return out
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _handle(self) -> None:
        import time

        body = self._body()
        fault = self.sim.take_fault(self.command, self.path)
        self.sim.log(self.command, self.path, self.headers.get("Range"))
        if fault is not None and fault.delay_s:
            time.sleep(fault.delay_s)
        if fault is not None and fault.status is not None:
            code = CODES.get(fault.status, "Error")
            error = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>injected {code}'
                     f'</Message><RequestId>fwe-test</RequestId></Error>').encode()
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error if self.command != "HEAD" else b"")
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "content-length")}
        if self.command in ("PUT", "POST") or body:
            headers["Content-Length"] = str(len(body))
        connection = http.client.HTTPConnection(*self.sim.moto_address, timeout=60)
        try:
            connection.request(self.command, self.path, body=body or None, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        finally:
            connection.close()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)) if self.command != "HEAD" else
                         answer.getheader("Content-Length", "0"))
        if fault is not None and fault.cut_after is not None:
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[:fault.cut_after])
            self.wfile.flush()
            self.close_connection = True
            return
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle


class S3Sim:
    """moto's S3 server and the fault layer in front of it, both on 127.0.0.1 ports of their own."""

    def __init__(self):
        self._faults: list[Fault] = []
        self._log: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> "S3Sim":
        import os

        # multipart pieces of any size (S3's 5 MiB floor kept out of the tests' small files); read as moto imports
        os.environ.setdefault("S3_UPLOAD_PART_MIN_SIZE", "1024")
        from moto.server import ThreadedMotoServer

        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        self.moto_address = self._moto.get_host_and_port()
        handler = type("Handler", (_Proxy,), {"sim": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3sim-proxy", daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.client = self._client()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._moto.stop()

    @property
    def address(self) -> tuple[str, int]:
        """The fault layer's (host, port): where a proxy in front of the server points (it keeps connections open
        across requests, as S3 does; moto's own server closes each)."""
        return self._server.server_address[:2]

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The variables botocore reads: this server's endpoint (or `endpoint`, a proxy in front of it) and
        moto's test credentials; no profile, no instance metadata."""
        return {"AWS_ENDPOINT_URL": endpoint or self.url, "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent",
                "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}

    def _client(self):
        import boto3

        host, port = self.moto_address
        return boto3.client("s3", endpoint_url=f"http://{host}:{port}", aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")

    def bucket(self, name: str) -> None:
        self.client.create_bucket(Bucket=name)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def faults(self, *faults: Fault) -> None:
        with self._lock:
            self._faults = list(faults)

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    return fault
        return None

    def log(self, method: str, path: str, range_: str | None) -> None:
        with self._lock:
            self._log.append((method, path, range_))

    def requests(self, method: str | None = None, path: str = "") -> list[tuple[str, str, str | None]]:
        """The requests forwarded or answered so far, of `method` (None: any) whose path matches `path`."""
        with self._lock:
            return [r for r in self._log if (method is None or r[0] == method) and re.search(path, r[1])]

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()


class _NotFound(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _handle(self) -> None:
        page = b"<html><body><h1>Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(page)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle


class NotS3:
    """A web server on 127.0.0.1 that answers every request with a 404 page: an endpoint that is not S3's."""

    def __enter__(self) -> "NotS3":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="not-s3", daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

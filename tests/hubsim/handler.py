"""HTTP request handler of the test Hub server: routing, Hub-shaped answers, Range reads, fault injection.

One handler instance serves one keep-alive connection (HTTP/1.1, every answer has a Content-Length).
The endpoints are listed in server.py; errors carry the Hub's X-Error-Code headers so clients raise
their usual RepositoryNotFoundError / RevisionNotFoundError / EntryNotFoundError.
"""

from __future__ import annotations

import mimetypes
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from tests.hubsim import cdn
from tests.hubsim.requestlog import endpoint_template, request_kind
from tests.hubsim.store import Repo

if TYPE_CHECKING:
    from tests.hubsim.server import _Server

CHUNK = 64 * 1024
TREE_PAGE = 1000  # entries per tree page; more follow through a Link: rel="next" header, as on the Hub
AGENT_HARNESSES = {"standardEnvVars": [], "harnesses": {}}


class HttpError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, commit: str | None = None):
        super().__init__(message)
        self.status, self.code, self.commit = status, code, commit


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hubsim/1"
    server: "_Server"

    # -- plumbing ----------------------------------------------------------------------------------
    def setup(self) -> None:
        super().setup()
        self.conn_id = self.server.hub.next_connection()

    def log_message(self, format, *args) -> None:  # noqa: A002 - the request log replaces stderr lines
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        hub = self.server.hub
        hub.request_started()
        try:
            self._answer(hub)
        finally:
            hub.request_ended()

    def _answer(self, hub) -> None:
        started = time.perf_counter()
        log, seq = hub.log, hub.log.arrive()  # the record belongs to the log current at arrival
        faults = self._faults = hub.fault_state
        line = f"{self.command} {self.path}" + (f" range={self.headers['Range']}" if self.headers.get("Range") else "")
        self._record = {"conn": self.conn_id, "method": self.command, "path": self.path,
                        "endpoint": endpoint_template(self.command, self.path, hub.repo_ids()),
                        "kind": request_kind(self.path),
                        "range": self.headers.get("Range"), "status": None, "bytes": 0, "fault": None,
                        "ua": (self.headers.get("User-Agent") or "")[:160],
                        "auth": self.headers.get("Authorization") is not None}
        self._drop_after = None
        self._redirect_to = faults.faults.redirect_to if faults.should_redirect(line) else None
        body = self._read_body()
        if faults.should_stall(line):
            self._record["fault"] = "stall"
            log.add(dict(self._record), seq)  # logged on arrival: it never gets an answer
            hub.request_ended()  # not in flight for wait_idle: it will never end by itself
            faults.released.wait()
            hub.request_started()
            self.close_connection = True
            return
        if faults.take_unanswered(line):
            self._record["fault"] = "unanswered"
            self.close_connection = True  # closed without a word: the client reads the end of the connection
            log.add(self._record, seq)
            return
        if faults.faults.delay_s:
            hub.stopping.wait(faults.faults.delay_s)
        late = faults.burst_delay(line)
        if late:
            self._record["fault"] = "burst"
            hub.stopping.wait(late)
        try:
            if faults.take_failure(line):
                self._record["fault"] = "fail"
                headers = {"Retry-After": str(faults.faults.retry_after)} if faults.faults.retry_after is not None else {}
                self._send_json({"error": "hubsim: injected failure"}, status=faults.faults.fail_status, headers=headers)
            else:
                self._drop_after = faults.drop_budget(line)
                self._route(body)
        except HttpError as exc:
            headers = {"X-Error-Message": str(exc)}
            if exc.code:
                headers["X-Error-Code"] = exc.code
            if exc.commit:
                headers["X-Repo-Commit"] = exc.commit
            self._send_json({"error": str(exc)}, status=exc.status, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            self._record["status"] = self._record["status"] or "client-gone"
        except Exception as exc:  # a hubsim bug: answer 500 (if still possible) and keep it in the log
            self._record["error"] = f"{type(exc).__name__}: {exc}"
            self.close_connection = True
            if self._record["status"] is None:
                self._send_json({"error": f"hubsim internal error: {exc}"}, status=500)
        if faults.should_hang_up(line):
            self.close_connection = True  # after the answer, which said nothing of it (no Connection: close)
            self._record["fault"] = self._record["fault"] or "hangup"
        self._record["ms"] = round((time.perf_counter() - started) * 1000, 2)
        log.add(self._record, seq)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _start(self, status: int, headers: dict) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self._record["status"] = status

    def _send_bytes(self, data: bytes, status: int = 200, content_type: str = "application/json",
                    headers: dict | None = None) -> None:
        self._start(status, {"Content-Type": content_type, "Content-Length": str(len(data)), **(headers or {})})
        if self.command != "HEAD":
            self._write_body([data])

    def _redirect(self, headers: dict, signed: str | None = None) -> None:
        """302 to the redirect fault's server (the same path, or a resolve's `signed` CDN path), or back to this
        one's: a loop, or with a signed path this server's own CDN."""
        self._record["fault"] = "redirect"
        where = (self._redirect_to or "") + (signed or self.path)
        self._start(302, {**headers, "Location": where, "Content-Length": "0"})

    def _send_json(self, obj, status: int = 200, headers: dict | None = None) -> None:
        self._send_bytes(orjson.dumps(obj), status=status, headers=headers)

    def _write_body(self, chunks) -> None:
        """Write the body, cutting the connection after `_drop_after` bytes when a drop fault applies."""
        budget = self._drop_after
        for chunk in chunks:
            if budget is not None and len(chunk) > budget:
                if self._faults.claim_drop():
                    self.wfile.write(chunk[:budget])
                    self.wfile.flush()
                    self._record["bytes"] += budget
                    self._record["fault"] = "drop"
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)  # the client sees the body end early
                    return
                budget = None
            self.wfile.write(chunk)
            self._record["bytes"] += len(chunk)
            if budget is not None:
                budget -= len(chunk)

    # -- routing -----------------------------------------------------------------------------------
    def _route(self, body: bytes) -> None:
        split = urlsplit(self.path)
        parts = split.path.split("/")[1:]
        query = parse_qs(split.query)
        kind = "datasets" if parts and parts[0] == "datasets" else "models"
        offset = 1 if kind == "datasets" else 0
        resolve = len(parts) >= offset + 5 and parts[offset + 2] == "resolve" and self.command in ("GET", "HEAD")
        signing = self._faults.faults.sign_ttl_s is not None
        if self._redirect_to is not None and not (resolve and (self._redirect_to or signing)):  # (in _resolve)
            return self._redirect({})
        if parts and parts[0] == "cdn" and self.command in ("GET", "HEAD"):
            return self._cdn()
        if parts[:2] == ["api", "agent-harnesses"] and len(parts) == 2:
            return self._send_json(AGENT_HARNESSES)
        if parts and parts[0] == "api" and len(parts) >= 4 and parts[1] in ("datasets", "models"):
            repo = self._repo(parts[1], f"{parts[2]}/{parts[3]}")
            rest = parts[4:]
            if not rest and self.command == "GET":
                return self._send_json(self._info(repo))
            if len(rest) >= 2 and rest[0] == "revision" and self.command == "GET":
                return self._send_json(self._info(self._revision(repo, unquote(rest[1]))))
            if len(rest) >= 2 and rest[0] == "tree" and self.command == "GET":
                return self._tree(self._revision(repo, unquote(rest[1])), unquote("/".join(rest[2:])), query)
            if len(rest) == 2 and rest[0] == "paths-info" and self.command == "POST":
                return self._paths_info(self._revision(repo, unquote(rest[1])), body)
        if resolve:
            repo = self._repo(kind, f"{parts[offset]}/{parts[offset + 1]}")
            at = self._revision(repo, unquote(parts[offset + 3]))
            return self._resolve(at, unquote("/".join(parts[offset + 4:])))
        raise HttpError(404, f"hubsim: no such endpoint {self.command} {split.path}")

    def _cdn(self) -> None:
        """A signed CDN URL (tests/hubsim/cdn.py): 403 when expired or tampered, else the file, Range served (unless
        refuse_ranges)."""
        try:
            kind, repo_id, sha, path = cdn.check(self.path)
        except cdn.Refused as exc:
            self._record["fault"] = "refused"
            return self._send_bytes(f"<Error><Code>AccessDenied</Code><Message>{exc}</Message></Error>".encode(),
                                    status=403, content_type="application/xml")
        file = self._revision(self._repo(kind, repo_id), sha).files.get(path)
        if file is None:
            raise HttpError(404, "NoSuchKey")
        self._serve(file, {"Content-Type": "application/octet-stream", "ETag": f'"{file.sha256 or file.etag}"',
                           "Accept-Ranges": "none" if self._faults.faults.refuse_ranges else "bytes"},
                    ranges=not self._faults.faults.refuse_ranges)

    def _repo(self, kind: str, repo_id: str) -> Repo:
        repo = self.server.hub.store.repo(kind, repo_id)
        if repo is None:
            raise HttpError(401, "Repository not found", code="RepoNotFound")
        return repo

    @staticmethod
    def _revision(repo: Repo, rev: str) -> Repo:
        """The repo at `rev` (main, its commit or an earlier one's sha); 404 RevisionNotFound for any other."""
        found = repo.at(rev)
        if found is None:
            raise HttpError(404, f"Invalid rev id: {rev}", code="RevisionNotFound")
        return found

    # -- endpoints ---------------------------------------------------------------------------------
    @staticmethod
    def _info(repo: Repo) -> dict:
        author, sha = repo.repo_id.split("/")[0], repo.sha
        info = {"_id": sha[:24], "id": repo.repo_id, "author": author, "sha": sha,
                "lastModified": repo.last_modified, "createdAt": "2024-05-28T00:00:00.000Z", "private": False,
                "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
                "cardData": repo.card_data, "siblings": [{"rfilename": path} for path in sorted(repo.files)],
                "usedStorage": sum(f.size for f in repo.files.values())}
        if repo.repo_type == "model":
            info.update(modelId=repo.repo_id, library_name="transformers", pipeline_tag="text-generation")
        return info

    def _tree(self, repo: Repo, path: str, query: dict) -> None:
        sha = repo.sha
        recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
        entries = repo.tree(path, recursive)
        if entries is None:
            raise HttpError(404, f"Entry not found: {path}", code="EntryNotFound", commit=sha)
        if query.get("expand", ["false"])[0].lower() in ("1", "true"):
            last_commit = {"id": sha, "title": "hubsim build", "date": repo.last_modified}
            entries = [dict(e, lastCommit=last_commit) for e in entries]
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start:start + TREE_PAGE]
        headers = {}
        if start + TREE_PAGE < len(entries):
            base = self.path.split("?")[0]
            others = "&".join(f"{k}={v[0]}" for k, v in query.items() if k != "cursor")
            headers["Link"] = f'<{self.server.hub.url}{base}?{others}&cursor={start + TREE_PAGE}>; rel="next"'
        self._send_json(page, headers=headers)

    def _paths_info(self, repo: Repo, body: bytes) -> None:
        content_type = self.headers.get("Content-Type", "")
        if "json" in content_type:
            paths = orjson.loads(body or b"{}").get("paths", [])
        else:
            paths = parse_qs(body.decode()).get("paths", [])
        paths = [paths] if isinstance(paths, str) else paths
        dirs = repo.directories()
        found = []
        for path in paths:
            path = path.strip("/")
            if path in repo.files:
                found.append(repo.files[path].tree_entry())
            elif path in dirs:
                found.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": path})
        self._send_json(found)

    def _resolve(self, repo: Repo, path: str) -> None:
        sha = repo.sha
        file = repo.files.get(path)
        if file is None:
            raise HttpError(404, "Entry not found", code="EntryNotFound", commit=sha)
        headers = {"Content-Type": mimetypes.guess_type(path)[0] or "application/octet-stream",
                   "ETag": f'"{file.etag}"', "X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
        if file.sha256:
            headers.update({"X-Linked-Etag": f'"{file.sha256}"', "X-Linked-Size": str(file.size)})
        ttl = self._faults.faults.sign_ttl_s
        if self._redirect_to and ttl is None:  # a redirect to another server: the file's headers, the same path
            return self._redirect(headers)
        if self._redirect_to is not None and ttl is not None and file.sha256:  # the Hub's own: an LFS file's headers
            return self._redirect(headers, cdn.sign(repo.repo_type + "s", repo.repo_id, sha, path, ttl))  # + CDN URL
        self._serve(file, headers)

    def _serve(self, file, headers: dict, ranges: bool = True) -> None:
        """The file's bytes: a Range (206; 416 when unsatisfiable), unless `ranges` is False, or all of them (200)."""
        start, end = 0, file.size - 1
        status = 200
        wanted = self.headers.get("Range") if ranges else None
        if wanted:
            parsed = cdn.parse_range(wanted, file.size)
            if parsed is None:
                self._start(416, {"Content-Range": f"bytes */{file.size}", "Content-Length": "0"})
                return
            start, end = parsed
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{file.size}"
        headers["Content-Length"] = str(end - start + 1)
        self._start(status, headers)
        if self.command == "HEAD":
            return
        self._write_body(cdn.file_chunks(file.disk, start, end, CHUNK))


"""The record of a bootstrap's upload to a bucket (bootstrap.bucket), kept beside the staged parts: what a re-run after
Ctrl-C or kill -9 needs to send no finished piece again.

`upload.jsonl` is a journal: a header line (the bucket URL and the piece size), then one line per event, appended
with a single write each (a process killed mid-run loses no line it wrote; a line torn by a crash of the machine is
the last and is ignored). The events of a part: `begin` (its multipart upload's id, and the staged file's size and
modification time it was begun from), `n` (a piece sent: its ETag and MD5), `done` (the object complete in the bucket
and its ETag checked against the bytes sent). A file staged again since (another size or modification time) starts
its part over. One line per piece, never a rewrite of the whole record: the cost of recording stays flat however many
parts there are.
"""

from __future__ import annotations

import os
import threading

import orjson

from fwe_cli.artifacts import write_atomic

JOURNAL = "upload.jsonl"


def file_identity(path: str) -> list[int]:
    """[size, modification time in ns] of a staged file: a part staged again differs in one of them."""
    stat = os.stat(path)
    return [stat.st_size, stat.st_mtime_ns]


class Journal:
    """The parts' upload states, replayed from `staging/upload.jsonl` and appended to as the upload goes."""

    def __init__(self, staging: str, url: str, piece: int):
        self.path = os.path.join(staging, JOURNAL)
        self.url, self.piece = url, piece
        self.parts: dict[str, dict] = {}
        """name -> {"file": [size, mtime_ns], "upload_id", "pieces": {n: [etag, md5]}} or {"file", "done": etag}."""
        self._lock = threading.Lock()
        header, events, torn = self._read()
        for event in events if header.get("url") == url else ():
            self._apply(event)
        if header.get("piece") != piece:  # pieces of another size: only whole objects carry over
            self.parts = {name: state for name, state in self.parts.items() if "done" in state}
        if torn or header != {"url": url, "piece": piece}:  # never append after a torn line
            self._rewrite()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _read(self) -> tuple[dict, list[dict], bool]:
        """(the header, the events, whether a line was torn) of the journal as it is on disk."""
        try:
            with open(self.path, "rb") as handle:
                lines = handle.read().split(b"\n")
        except FileNotFoundError:
            return {}, [], True
        events, torn = [], lines[-1] != b""  # the text after the last newline is a torn line, or nothing
        for line in lines[:-1]:
            try:
                events.append(orjson.loads(line))
            except orjson.JSONDecodeError:  # the events before it stand
                torn = True
                break
        if not events or not isinstance(events[0], dict):
            return {}, [], True
        return events[0], events[1:], torn

    def _apply(self, event: dict) -> None:
        name = event["part"]
        if "upload_id" in event:
            self.parts[name] = {"file": event["file"], "upload_id": event["upload_id"], "pieces": {}}
        elif "n" in event:
            self.parts.setdefault(name, {"pieces": {}}).setdefault("pieces", {})[event["n"]] = [event["etag"],
                                                                                                event["md5"]]
        elif "done" in event:
            self.parts[name] = {"file": event["file"], "done": event["done"]}
        elif event.get("reset"):
            self.parts.pop(name, None)

    def _events(self):
        for name, state in self.parts.items():
            if "done" in state:
                yield {"part": name, "file": state["file"], "done": state["done"]}
                continue
            if "upload_id" in state:
                yield {"part": name, "file": state["file"], "upload_id": state["upload_id"]}
            for n, (etag, md5) in state.get("pieces", {}).items():
                yield {"part": name, "n": n, "etag": etag, "md5": md5}

    def _rewrite(self) -> None:
        """The journal as the state now stands, written whole (once, when it is opened over another)."""
        lines = [{"url": self.url, "piece": self.piece}, *self._events()]
        write_atomic(self.path, b"".join(orjson.dumps(line) + b"\n" for line in lines))

    def add(self, event: dict) -> None:
        """Apply one event and append it: one write of one line."""
        with self._lock:
            self._apply(event)
            os.write(self._fd, orjson.dumps(event) + b"\n")

    def state(self, name: str, identity: list[int]) -> dict:
        """The part's state if it was begun from the file as it is now, else a fresh (empty) one."""
        state = self.parts.get(name)
        if state is not None and state.get("file") != identity:
            self.reset(name)
            state = None
        return state or {}

    def reset(self, name: str) -> None:
        """Forget the part (staged again, or not whole in the bucket): its upload starts over."""
        self.add({"part": name, "reset": True})

    def close(self) -> None:
        os.close(self._fd)

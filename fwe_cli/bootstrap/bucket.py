"""A bootstrap into an object store (`fwe bootstrap --out s3://bucket/prefix`): staged on local disk first (the same
crash-safe run, in `staging`), then its parts uploaded in parallel, each verified, the manifest written last, so a
reader never finds a manifest whose parts are not all there and whole.

S3 (and the S3-compatible stores: Hugging Face's buckets, MinIO, R2) uploads each part as a multipart upload of
PART_BYTES pieces, UPLOADS of them in flight over all parts; every piece done is recorded in `upload.json` beside
the staged parts (its ETag), so a run resumed after a kill completes the uploads it began without sending their
finished pieces again, and skips the parts already verified in the bucket. A part is verified by its size and its
ETag, which S3 makes of the MD5s of the pieces it received (`md5 of the pieces' md5s-N`), computed here from the
bytes sent. Other stores (gs://, az://) put each part whole (fsspec's put_file) and verify its size.
"""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import orjson

from fwe_cli.artifacts import write_atomic
from fwe_cli.errors import OutputError
from fwe_cli.loader.files.listing import MANIFEST_NAME
from fwe_cli.loader.remote.object_store import Store, store_for

PART_BYTES = 16 << 20
UPLOADS = 8
RECORD = "upload.json"


def _md5_etag(path: str, size: int, piece: int) -> str:
    """The ETag S3 gives an upload of the file in pieces of `piece` bytes (one piece: its plain MD5)."""
    digests = []
    with open(path, "rb") as handle:
        while block := handle.read(piece):
            digests.append(hashlib.md5(block).digest())
    if len(digests) <= 1:
        return (digests[0] if digests else hashlib.md5(b"").digest()).hex()
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"


class Upload:
    """The upload of one staged bootstrap directory to `url`, resumable through `staging/upload.json`."""

    def __init__(self, staging: str, url: str, options: dict | None = None, uploads: int = UPLOADS,
                 piece: int | None = None):
        self.staging, self.url = staging, url.rstrip("/")
        self.store: Store = store_for(url, options or {})
        self.uploads, self.piece = uploads, piece or PART_BYTES
        self.record_path = os.path.join(staging, RECORD)
        try:
            self.record = orjson.loads(open(self.record_path, "rb").read())
        except (OSError, orjson.JSONDecodeError):
            self.record = {}
        if self.record.get("url") != self.url:
            self.record = {"url": self.url, "piece": self.piece, "parts": {}}
        elif self.record.get("piece") != self.piece:  # uploads begun in pieces of another size start over
            self.record = {"url": self.url, "piece": self.piece, "parts": {
                name: state for name, state in self.record.get("parts", {}).items() if "verified" in state}}
        self.sent_bytes = 0
        self.pieces_sent = 0
        self._lock = threading.Lock()
        self._saving = threading.Lock()

    def _save(self) -> None:
        with self._saving:  # one writer of the record at a time (its temporary file's name is the process's)
            with self._lock:
                data = orjson.dumps(self.record)
            write_atomic(self.record_path, data)

    def run(self, manifest: dict) -> dict:
        """Upload every part the (complete) manifest lists, verified, then the manifest; a summary."""
        entries = manifest["files"]
        with ThreadPoolExecutor(self.uploads, thread_name_prefix="fwe-upload") as pool:
            jobs = [job for entry in entries for job in self._jobs(entry)]
            for future in [pool.submit(fn) for fn in jobs]:
                future.result()
            for future in [pool.submit(self._complete, entry) for entry in entries]:
                future.result()
        listed = {obj.url: obj for obj in self.store.find(self.url)}  # one listing verifies every part
        for entry in entries:
            self._verify(entry, listed.get(f"{self.url}/{entry['name']}"))
        self.store.write(f"{self.url}/{MANIFEST_NAME}", orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        return {"url": self.url, "parts": len(entries), "bytes_sent": self.sent_bytes, "pieces_sent": self.pieces_sent,
                "object_store": self.store.describe()}

    def _jobs(self, entry: dict) -> list:
        """The pieces of one part still to send (none when the part is verified in the bucket already)."""
        name, size = entry["name"], entry["bytes"]
        state = self.record["parts"].setdefault(name, {})
        if state.get("verified") == entry.get("sha256"):
            return []
        path = os.path.join(self.staging, name)
        if not self._multipart or size <= self.piece:
            return [] if state.get("put") else [lambda: self._put_whole(name, path)]
        if "upload_id" not in state:
            state["upload_id"] = self._s3("create_multipart_upload", Key=self._key(name))["UploadId"]
            state["pieces"] = {}
            self._save()
        count = -(-size // self.piece)
        return [lambda n=n: self._put_piece(name, path, n) for n in range(1, count + 1)
                if str(n) not in state["pieces"]]

    @property
    def _multipart(self) -> bool:
        return self.store.protocol in ("s3", "s3a")

    def _key(self, name: str) -> str:
        return self.store.fs.split_path(f"{self.url}/{name}")[1]

    def _s3(self, method: str, **kwargs):
        from fsspec.asyn import sync

        fs = self.store.fs
        bucket = fs.split_path(self.url + "/x")[0]
        return self.store.call(lambda: sync(fs.loop, fs._call_s3, method, Bucket=bucket, **kwargs), "write",
                               f"{self.url}/{kwargs.get('Key', '').rsplit('/', 1)[-1]}")

    def _put_whole(self, name: str, path: str) -> None:
        self.store.call(lambda: self.store.fs.put_file(path, f"{self.url}/{name}"), "write", f"{self.url}/{name}")
        with self._lock:
            self.sent_bytes += os.path.getsize(path)
            self.pieces_sent += 1
            self.record["parts"][name]["put"] = True
        self._save()

    def _put_piece(self, name: str, path: str, number: int) -> None:
        with open(path, "rb") as handle:
            handle.seek((number - 1) * self.piece)
            body = handle.read(self.piece)
        state = self.record["parts"][name]
        answer = self._s3("upload_part", Key=self._key(name), UploadId=state["upload_id"], PartNumber=number,
                          Body=body)
        with self._lock:
            state["pieces"][str(number)] = answer["ETag"]
            self.sent_bytes += len(body)
            self.pieces_sent += 1
        self._save()

    def _complete(self, entry: dict) -> None:
        """Complete the part's multipart upload (none for a part put whole or verified already)."""
        name = entry["name"]
        state = self.record["parts"][name]
        if "upload_id" in state and state.get("verified") != entry.get("sha256"):
            pieces = [{"PartNumber": int(n), "ETag": etag} for n, etag in sorted(state["pieces"].items(),
                                                                              key=lambda item: int(item[0]))]
            self._s3("complete_multipart_upload", Key=self._key(name), UploadId=state["upload_id"],
                     MultipartUpload={"Parts": pieces})

    def _verify(self, entry: dict, found) -> None:
        """The object's size and ETag are those of the bytes staged (OutputError naming it otherwise): record it
        verified."""
        name, size = entry["name"], entry["bytes"]
        state = self.record["parts"][name]
        if state.get("verified") == entry.get("sha256"):
            return
        path = os.path.join(self.staging, name)
        expected = _md5_etag(path, size, self.piece) if self._multipart else None
        got = (found.version or "").strip('"') if found else None
        if found is None or found.size != size or (expected is not None and got != expected):
            state.clear()
            self._save()
            what = "missing" if found is None else f"{found.size} bytes (ETag {got}), staged {size} (ETag {expected})"
            raise OutputError(f"{self.url}/{name} did not arrive whole: {what}; re-run to upload it again")
        state.clear()
        state["verified"] = entry.get("sha256")
        self._save()


def upload_bootstrap(staging: str, url: str, options: dict | None = None, uploads: int = UPLOADS) -> dict:
    """Upload the complete bootstrap staged at `staging` to `url` (see the module docstring)."""
    try:
        manifest = orjson.loads(open(os.path.join(staging, MANIFEST_NAME), "rb").read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise OutputError(f"cannot read the staged manifest in {staging}: {exc}") from exc
    if not manifest.get("complete"):
        raise OutputError(f"the bootstrap staged in {staging} is not complete: finish it before uploading")
    return Upload(staging, url, options, uploads).run(manifest)

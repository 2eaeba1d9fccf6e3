"""A bootstrap into an object store (`fwe bootstrap --out s3://bucket/prefix`): staged on local disk (the same
crash-safe run, in `staging`), its parts uploaded in parallel as soon as each is staged (`offer`), each verified, the
manifest written last (`run`), so a reader never finds a manifest whose parts are not all there and whole.

S3 (and the S3-compatible stores: Hugging Face's buckets, MinIO, R2) takes a part larger than PART_BYTES as a
multipart upload of PART_BYTES pieces, a smaller one in one PUT; UPLOADS requests are in flight over all parts. Each
answer is checked as it comes: a piece's ETag is the MD5 of the bytes S3 received, a whole object's is its MD5 (one
PUT) or the MD5 of its pieces' MD5s and their count (multipart), so every part is verified against the bytes read
from the staged file without reading it again or listing the bucket. Every piece sent and part done is one line of
the journal beside the staged parts (bootstrap.upload_journal), so a run resumed after Ctrl-C or kill -9 completes
the uploads it began without sending a recorded piece again; the parts an earlier run completed are confirmed by one
listing (size and ETag) before the manifest is written, and sent again if they are gone. Other stores (gs://, az://)
put each part whole and verify its size.
"""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import orjson

from fwe_cli.bootstrap.upload_journal import Journal, file_identity
from fwe_cli.errors import OutputError
from fwe_cli.loader.files.bootstrap_format import Layout
from fwe_cli.loader.files.listing import MANIFEST_NAME
from fwe_cli.loader.remote.object_store import Store, store_for
from fwe_cli.loader.remote.store_errors import UploadGone

PART_BYTES = 16 << 20
UPLOADS = 8


def multipart_etag(md5s: list[str]) -> str:
    """The ETag S3 gives a multipart upload of pieces with these MD5s (hex), in order."""
    return f"{hashlib.md5(b''.join(bytes.fromhex(m) for m in md5s)).hexdigest()}-{len(md5s)}"


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


class Upload:
    """The upload of one staged bootstrap directory to `url`, resumable through its journal."""

    def __init__(self, staging: str, url: str, options: dict | None = None, uploads: int = UPLOADS,
                 piece: int | None = None):
        self.staging, self.url = staging, url.rstrip("/")
        self.store: Store = store_for(url, options or {})
        self.uploads, self.piece = uploads, piece or PART_BYTES
        self.sent_bytes = self.pieces_sent = 0
        self._journal: Journal | None = None
        self._pool = ThreadPoolExecutor(uploads, thread_name_prefix="fwe-upload")
        self._hashing = ThreadPoolExecutor(2, thread_name_prefix="fwe-upload-md5")
        self._offered: set[str] = set()
        self._earlier: set[str] = set()
        """Parts an earlier run completed: confirmed in the bucket by one listing before the manifest."""
        self._active = 0
        self._errors: list[BaseException] = []
        self._idle = threading.Condition()
        self._stopping = False

    @property
    def journal(self) -> Journal:
        if self._journal is None:  # opened on first use: the staging folder exists by then
            self._journal = Journal(self.staging, self.url, self.piece)
        return self._journal

    @property
    def _multipart(self) -> bool:
        return self.store.protocol in ("s3", "s3a")

    def offer(self, count: int) -> None:
        """Parts 0 .. count-1 are staged (renamed into place, final): upload those not offered yet, in the
        background."""
        if self._errors:  # an upload failed: the run stops with it rather than staging on for nothing
            raise self._errors[0]
        layout = Layout.for_out(self.staging)
        for index in range(count):
            self._offer(layout.part_name(index))

    def run(self, manifest: dict) -> dict:
        """Upload every part the (complete) manifest lists that is not in the bucket yet, verified, then the manifest;
        a summary. Raises the first failure (the journal keeps what was done)."""
        try:
            names = [entry["name"] for entry in manifest["files"]]
            for name in names:
                self._offer(name)
            self.wait()
            self._confirm_earlier()
            for name in names:  # every part verified, from the file staged as it is now
                state = self.journal.parts.get(name, {})
                if "done" not in state or state["file"] != file_identity(os.path.join(self.staging, name)):
                    raise OutputError(f"{self.url}/{name} was not verified in the bucket: re-run to upload it")
            self.store.write(f"{self.url}/{MANIFEST_NAME}", orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        finally:
            self.close()
        return {"url": self.url, "parts": len(names), "bytes_sent": self.sent_bytes, "pieces_sent": self.pieces_sent,
                "object_store": self.store.describe()}

    def close(self) -> None:
        """Stop: nothing new starts, the requests in flight end (what they finish is recorded)."""
        with self._idle:
            self._stopping = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._hashing.shutdown(wait=True)
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def _offer(self, name: str) -> None:
        if name in self._offered:
            return
        self._offered.add(name)
        path = os.path.join(self.staging, name)
        identity = file_identity(path)
        if "done" in self.journal.state(name, identity):
            self._earlier.add(name)
        elif not self._multipart or identity[0] <= self.piece:
            self._submit(self._put_whole, name, path, identity)
        else:
            self._submit(self._pieces, name, path, identity)

    def _submit(self, fn, *args) -> None:
        with self._idle:
            if self._stopping or self._errors:
                return
            self._active += 1
        self._pool.submit(self._job, fn, *args)

    def _job(self, fn, *args) -> None:
        try:
            if not (self._stopping or self._errors):  # after a failure nothing new is sent: the run ends with it
                fn(*args)
        except BaseException as exc:
            with self._idle:
                self._errors.append(exc)
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def wait(self) -> None:
        """Until every upload begun (and the pieces and completions they begin) has ended; the first failure
        raised."""
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0)
            if self._errors:
                raise self._errors[0]

    def _s3(self, method: str, name: str, **kwargs) -> dict:
        from fsspec.asyn import sync

        fs, url = self.store.fs, f"{self.url}/{name}"
        bucket, key, _ = fs.split_path(url)
        return self.store.call(lambda: sync(fs.loop, fs._call_s3, method, Bucket=bucket, Key=key, **kwargs), "write",
                               url)

    def _sent(self, size: int) -> None:
        with self._idle:
            self.sent_bytes += size
            self.pieces_sent += 1

    def _put_whole(self, name: str, path: str, identity: list[int]) -> None:
        with open(path, "rb") as handle:
            body = handle.read()
        if self._multipart:
            md5 = self._hashing.submit(_md5, body)  # while the body is on its way
            got = self._s3("put_object", name, Body=body)["ETag"].strip('"')
            self._sent(len(body))
            return self._done(name, identity, got, md5.result())
        url = f"{self.url}/{name}"
        self.store.call(lambda: self.store.fs.pipe_file(url, body), "write", url)
        self._sent(len(body))
        found = self.store.info(url)
        self._done(name, identity, found and found.size, len(body), found and found.version)

    def _pieces(self, name: str, path: str, identity: list[int]) -> None:
        """Begin (or continue) the part's multipart upload and send the pieces it lacks; the last to arrive completes
        it."""
        state = self.journal.state(name, identity)
        if "upload_id" not in state:
            upload_id = self._s3("create_multipart_upload", name)["UploadId"]
            self.journal.add({"part": name, "file": identity, "upload_id": upload_id})
        done = self.journal.parts[name]["pieces"]
        missing = [n for n in range(1, -(-identity[0] // self.piece) + 1) if n not in done]
        if not missing:
            return self._complete(name, identity)
        left = [len(missing)]
        for number in missing:
            self._submit(self._piece, name, path, identity, number, left)

    def _piece(self, name: str, path: str, identity: list[int], number: int, left: list[int]) -> None:
        with open(path, "rb") as handle:
            handle.seek((number - 1) * self.piece)
            body = handle.read(self.piece)
        digest = self._hashing.submit(_md5, body)  # while the body is on its way
        try:
            etag = self._s3("upload_part", name, UploadId=self.journal.parts[name]["upload_id"], PartNumber=number,
                            Body=body)["ETag"]
        except UploadGone:  # aborted in the bucket since an earlier run began it
            self.journal.reset(name)
            raise OutputError(f"{self.url}/{name}: its multipart upload is gone from the bucket (aborted): re-run to "
                              "upload the part again") from None
        md5 = digest.result()
        if etag.strip('"') != md5:
            raise OutputError(f"{self.url}/{name}: piece {number} arrived changed (ETag {etag}, the bytes sent have "
                              f"MD5 {md5}): re-run to send it again")
        self.journal.add({"part": name, "n": number, "etag": etag, "md5": md5})
        self._sent(len(body))
        with self._idle:
            left[0] -= 1
            last = left[0] == 0
        if last:
            self._complete(name, identity)

    def _complete(self, name: str, identity: list[int]) -> None:
        pieces = sorted(self.journal.parts[name]["pieces"].items())
        expected = multipart_etag([md5 for _, (_, md5) in pieces])
        try:
            got = self._s3("complete_multipart_upload", name, UploadId=self.journal.parts[name]["upload_id"],
                           MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etag} for n, (etag, _) in pieces]}
                           )["ETag"].strip('"')
        except UploadGone:  # completed by an earlier run that ended before recording it (or aborted: then missing)
            found = self.store.info(f"{self.url}/{name}")
            got = (found.version or "").strip('"') if found else None
        self._done(name, identity, got, expected)

    def _done(self, name: str, identity: list[int], got, expected, version: str | None = None) -> None:
        """The part is in the bucket as `got` (its ETag, or size): recorded done when it is `expected`."""
        if got != expected:
            self.journal.reset(name)
            raise OutputError(f"{self.url}/{name} did not arrive whole: the bucket has {got}, the bytes sent make "
                              f"{expected}; re-run to upload it again")
        self.journal.add({"part": name, "file": identity, "done": version or got})

    def _confirm_earlier(self) -> None:
        """The parts an earlier run completed are still in the bucket, of the size and version it recorded (one
        listing); any that are not are uploaded again."""
        if not self._earlier:
            return
        listed = {obj.url: obj for obj in self.store.find(self.url)}
        for name in sorted(self._earlier):
            found, state = listed.get(f"{self.url}/{name}"), self.journal.parts[name]
            if found is None or found.size != state["file"][0] or (found.version or "").strip('"') != state["done"]:
                self.journal.reset(name)
                self._offered.discard(name)
                self._offer(name)
        self._earlier.clear()
        self.wait()


def upload_bootstrap(staging: str, url: str, options: dict | None = None, uploads: int = UPLOADS,
                     upload: Upload | None = None) -> dict:
    """Upload the complete bootstrap staged at `staging` to `url` (see the module docstring); `upload`: one begun
    while it was staged (Upload.offer)."""
    try:
        manifest = orjson.loads(open(os.path.join(staging, MANIFEST_NAME), "rb").read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise OutputError(f"cannot read the staged manifest in {staging}: {exc}") from exc
    if not manifest.get("complete"):
        raise OutputError(f"the bootstrap staged in {staging} is not complete: finish it before uploading")
    return (upload or Upload(staging, url, options, uploads)).run(manifest)


def bootstrap_into(config, url: str, on_progress=lambda info: None, should_stop=lambda: False) -> dict:
    """`fwe bootstrap --out URL`: the bootstrap staged in `config.out` (run_bootstrap), each part uploaded as soon as
    it is staged (Upload.offer, on the staging's progress), then the rest and the manifest; run_bootstrap's result
    with `bucket` (the upload's summary) and `output` (the URL) once complete."""
    from fwe_cli.bootstrap.run import run_bootstrap
    from fwe_cli.loader.remote.storage_options import parse_storage_options

    upload = Upload(config.out, url, parse_storage_options(config.storage_options))
    try:
        result = run_bootstrap(config, on_progress=lambda info: (on_progress(info), upload.offer(info["files"])),
                               should_stop=should_stop)
        if result["outcome"] != "interrupted":
            result["bucket"] = upload_bootstrap(config.out, url, upload=upload)
            result["output"] = url
        return result
    finally:
        upload.close()

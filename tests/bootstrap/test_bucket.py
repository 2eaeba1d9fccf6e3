"""`fwe bootstrap` into and out of a bucket, against moto's S3 server (tests/s3sim): --out s3://... stages locally,
uploads every part in verified multipart pieces and writes the manifest last, and the loader reads the bucket as the
bootstrap it is; an upload stopped by a failure resumes without sending a finished piece again; --source s3://...
--out DIR stages the bucket's documents on local disk."""

from __future__ import annotations

import re
import sys
import uuid

import numpy as np
import orjson
import pytest

from fwe_cli.bootstrap.bucket import Upload, upload_bootstrap
from fwe_cli.bootstrap.upload_journal import JOURNAL, Journal
from fwe_cli.errors import SourceError
from fwe_cli.loader import resolve_config
from tests.bootstrap.support import core_run, lines_of
from tests.helpers import invoke
from tests.loader.test_resume import pull
from tests.s3sim.server import Fault


@pytest.fixture()
def bucket(s3):
    name = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(name)
    return name


def _batches(path):
    return pull(resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=256, batch_size=4), 10_000)[0]


def test_bootstrap_into_a_bucket_uploads_verified_parts_then_the_manifest(s3, bucket, tmp_path, monkeypatch):
    """fwe bootstrap --out s3://bucket/boot --storage-option endpoint_url=... (no AWS_ENDPOINT_URL: the option alone
    reaches the server): every part and the manifest in the bucket, the manifest's PUT the last request that writes,
    the loader reads s3://bucket/boot as a bootstrap (the batches of the staged copy), and the artifact records the
    command line with the secret option's value redacted."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    url = f"s3://{bucket}/boot"
    args = ("bootstrap", "--gb", "0.0004", "--source", "synthetic", "--file-mb", "0.1", "--out", url, "--json",
            "--storage-option", f"endpoint_url={s3.url}", "--storage-option", "key=testing",
            "--storage-option=secret=testing")
    monkeypatch.setattr(sys, "argv", ["fwe", *args])  # what the artifact records
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.url)
    data = orjson.loads(result.stdout)
    recorded = orjson.loads(open(data["artifact"], "rb").read())["argv"]
    assert {"--storage-option=secret=<redacted>", "key=<redacted>", f"endpoint_url={s3.url}"} <= set(recorded)
    staged = tmp_path / data["manifest_path"].rsplit("/", 1)[0] if not data["manifest_path"].startswith("/") \
        else __import__("pathlib").Path(data["manifest_path"]).parent
    manifest = orjson.loads((staged / "manifest.json").read_bytes())
    assert len(manifest["files"]) >= 3 and data["bucket"]["parts"] == len(manifest["files"])
    assert s3.keys(bucket, "boot/") == sorted([f"boot/{e['name']}" for e in manifest["files"]] + ["boot/manifest.json"])
    writes = [path for method, path, _ in s3.requests() if method in ("PUT", "POST")]
    assert writes[-1].endswith("/boot/manifest.json")
    remote, local = _batches(url), _batches(staged)
    assert len(remote) == len(local) > 5 and all(np.array_equal(a, b) for a, b in zip(remote, local))


def test_a_failed_upload_resumes_without_sending_a_finished_piece_again(s3, bucket, tmp_path):
    """Parts uploaded in 16 KiB pieces; the third piece of one part is refused (403) once: the upload fails, naming
    the object; the re-run sends only the pieces that were not done, and the bucket holds every part whole."""
    staging = tmp_path / "staged"
    core_run(staging, source="synthetic", target_bytes=120_000, file_mb=0.05)
    refused = r"part-0+1\.jsonl\?.*partNumber=3$"
    s3.faults(Fault("PUT", refused, status=403, count=1))
    with pytest.raises(SourceError, match="access denied"):
        Upload(str(staging), f"s3://{bucket}/b", uploads=2, piece=16 << 10).run(
            orjson.loads((staging / "manifest.json").read_bytes()))
    first = {(p, n) for m, p, _ in s3.requests("PUT") if (n := re.search(r"partNumber=(\d+)", p))}
    s3.clear_log()
    result = Upload(str(staging), f"s3://{bucket}/b", uploads=2, piece=16 << 10).run(
        orjson.loads((staging / "manifest.json").read_bytes()))
    again = [p for m, p, _ in s3.requests("PUT") if "partNumber=" in p]
    sent_before = {p for p, _ in first if not re.search(refused, p)}
    assert not set(again) & sent_before and again
    assert result["pieces_sent"] == len(again)
    assert b"".join(s3.get(bucket, f"b/{e['name']}") for e in orjson.loads(
        (staging / "manifest.json").read_bytes())["files"]) == b"".join(lines_of(staging))
    assert upload_bootstrap(str(staging), f"s3://{bucket}/b")["pieces_sent"] == 0  # verified: nothing to send


def test_parts_offered_while_staging_are_uploaded_at_once_and_never_again(s3, bucket, tmp_path):
    """Upload.offer(2) (the staging's progress: two parts renamed into place) sends those two parts at once, before
    any other and before the manifest; the run at the end sends the others and the manifest, none of them twice."""
    staging = tmp_path / "staged"
    core_run(staging, source="synthetic", target_bytes=120_000, file_mb=0.02)
    manifest = orjson.loads((staging / "manifest.json").read_bytes())
    names = [entry["name"] for entry in manifest["files"]]
    assert len(names) >= 4
    upload = Upload(str(staging), f"s3://{bucket}/b", uploads=2, piece=8 << 10)
    upload.offer(2)
    upload.wait()
    assert s3.keys(bucket) == [f"b/{name}" for name in names[:2]]
    upload.run(manifest)
    assert s3.keys(bucket) == sorted([f"b/{name}" for name in names] + ["b/manifest.json"])
    completed = [path for method, path, _ in s3.requests("POST") if "uploadId=" in path]
    assert sorted(path.split("?")[0].rsplit("/", 1)[1] for path in completed) == names
    pieces = [path for method, path, _ in s3.requests("PUT") if "partNumber=" in path]
    assert len(pieces) == len(set(pieces)) == sum(-(-e["bytes"] // (8 << 10)) for e in manifest["files"])


def test_the_journal_keeps_what_a_killed_run_wrote_and_starts_a_restaged_part_over(tmp_path):
    """upload.jsonl after a kill: the pieces recorded before a torn last line are kept (and the torn line dropped, so
    the next line is not glued to it); a part whose staged file changed (size or modification time) starts over; a
    journal of another URL is not read."""
    (tmp_path / "part-00000.jsonl").write_bytes(b"x" * 100)
    journal = Journal(str(tmp_path), "s3://b/x", 64)
    journal.add({"part": "part-00000.jsonl", "file": [100, 1], "upload_id": "u1"})
    journal.add({"part": "part-00000.jsonl", "n": 1, "etag": '"e1"', "md5": "00"})
    journal.close()
    with open(tmp_path / JOURNAL, "ab") as handle:
        handle.write(b'{"part": "part-00000.jsonl", "n": 2, "et')
    journal = Journal(str(tmp_path), "s3://b/x", 64)
    assert journal.state("part-00000.jsonl", [100, 1]) == {"file": [100, 1], "upload_id": "u1",
                                                           "pieces": {1: ['"e1"', "00"]}}
    assert (tmp_path / JOURNAL).read_bytes().endswith(b"\n")
    assert journal.state("part-00000.jsonl", [100, 2]) == {}
    journal.close()
    assert Journal(str(tmp_path), "s3://b/x", 64).parts == {}
    journal = Journal(str(tmp_path), "s3://b/x", 64)
    journal.add({"part": "part-00000.jsonl", "file": [100, 1], "done": "e"})
    journal.close()
    assert Journal(str(tmp_path), "s3://b/other", 64).parts == {}


def test_bootstrap_from_a_bucket_stages_its_documents_on_disk(s3, bucket, tmp_path):
    """fwe bootstrap --source s3://bucket/data --out DIR: the JSONL parts hold the bucket's documents in order."""
    docs = [{"text": f"document {i} " + "w" * (i % 13), "id": f"d{i}"} for i in range(300)]
    s3.put(bucket, "data/a.jsonl", b"".join(orjson.dumps(d) + b"\n" for d in docs[:150]))
    s3.put(bucket, "data/b.jsonl", b"".join(orjson.dumps(d) + b"\n" for d in docs[150:]))
    out = tmp_path / "staged"
    result = invoke("bootstrap", "--gb", "1", "--source", f"s3://{bucket}/data", "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    assert [orjson.loads(line)["text"] for line in lines_of(out)] == [d["text"] for d in docs]
    assert orjson.loads(result.stdout)["manifest"]["local_path"] == f"s3://{bucket}/data"


def test_doctor_checks_a_buckets_access_one_line_each(s3, bucket):
    """fwe doctor --bucket URL --bucket-write: list, read and write each ok on a readable, writable bucket (the probe
    object removed again); under a 403 on reads the read line fails naming the object, and doctor still exits 0."""
    s3.put(bucket, "data/a.jsonl", b'{"text": "x"}\n')
    result = invoke("doctor", "--bucket", f"s3://{bucket}/data", "--bucket-write", "--json")
    report = orjson.loads(result.stdout)
    assert result.exit_code == 0 and [(c["check"], c["ok"]) for c in report["bucket"]["checks"]] == [
        ("list", True), ("read", True), ("write", True)]
    assert s3.keys(bucket) == ["data/a.jsonl"]
    s3.faults(Fault("GET", r"/data/a\.jsonl$", status=403, count=99))
    report = orjson.loads(invoke("doctor", "--bucket", f"s3://{bucket}/data", "--json").stdout)
    read = report["bucket"]["checks"][1]
    assert read["check"] == "read" and not read["ok"] and f"s3://{bucket}/data/a.jsonl: access denied" in read["detail"]
    assert any(p.startswith("bucket read:") for p in report["problems"])

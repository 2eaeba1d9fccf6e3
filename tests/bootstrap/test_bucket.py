"""`fwe bootstrap` into and out of a bucket, against moto's S3 server (tests/s3sim): --out s3://... stages locally,
uploads every part in verified multipart pieces and writes the manifest last, and the loader reads the bucket as the
bootstrap it is; an upload stopped by a failure resumes without sending a finished piece again; --source s3://...
--out DIR stages the bucket's documents on local disk."""

from __future__ import annotations

import re
import uuid

import numpy as np
import orjson
import pytest

from fwe_cli.bootstrap.bucket import Upload, upload_bootstrap
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
    """fwe bootstrap --out s3://bucket/boot: every part and the manifest in the bucket, the manifest's PUT the last
    request that writes, and the loader reads s3://bucket/boot as a bootstrap: the batches of the staged copy."""
    monkeypatch.chdir(tmp_path)
    url = f"s3://{bucket}/boot"
    result = invoke("bootstrap", "--gb", "0.0004", "--source", "synthetic", "--file-mb", "0.1", "--out", url, "--json")
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
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

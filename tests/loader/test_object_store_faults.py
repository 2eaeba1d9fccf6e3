"""What goes wrong with an object store, against moto's S3 server behind the fault layer (tests/s3sim): 503 SlowDown,
500 and cut bodies are retried and counted in the source's record; a bucket that does not exist, 403, missing
credentials, an endpoint that cannot be reached, a scheme whose filesystem is not installed and an object replaced
mid-run each end in one line naming the URL or the variable, with its documented exit code. And the other
filesystems share the code path (fsspec's memory filesystem behind the same URL handling); DataLoader workers each
make their own client."""

from __future__ import annotations

import uuid

import fsspec
import numpy as np
import orjson
import pytest

from fwe_cli.errors import ConfigError, LoaderError, SourceError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.remote.object_store import store_for
from fwe_cli.loader.stream import DocumentStream
from tests.helpers import invoke, one_object
from tests.loader.test_resume import pull
from tests.s3sim.server import Fault, NotS3

DOCS = [f"<{i:03d}>" + "abcdefghij"[: 1 + i % 10] * (2 + i % 5) + f"</{i:03d}>" for i in range(120)]


def _jsonl(texts) -> bytes:
    return b"".join(orjson.dumps({"text": t}) + b"\n" for t in texts)


@pytest.fixture()
def bucket(s3):
    name = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(name)
    s3.put(name, "a.jsonl", _jsonl(DOCS[:60]))
    s3.put(name, "b.jsonl", _jsonl(DOCS[60:]))
    return name


@pytest.fixture(scope="module")
def not_s3():
    with NotS3() as server:
        yield server


def _config(path, **kw):
    return resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=64, batch_size=2, **kw)


def test_slowdown_500_and_cut_bodies_are_retried_and_counted(s3, bucket, monkeypatch):
    """Two 503 SlowDown, one 500 and one body cut after 10 bytes on the reads of a.jsonl: the batches are those of a
    clean run, and the source's record counts the four retries by reason (the backoff's waits made short: how long
    they are is transient.py's, tested there)."""
    from fwe_cli.loader.remote import object_store
    from fwe_cli.loader.remote.transient import RetryPolicy

    monkeypatch.setattr(object_store, "STORE_RETRY", RetryPolicy(attempts=8, base_wait_s=0.001, max_wait_s=0.01))
    clean, _ = pull(_config(f"s3://{bucket}"), 1000)
    store = store_for(f"s3://{bucket}", {})
    before = dict(store.retried)
    s3.faults(Fault("GET", r"/a\.jsonl", status=503, count=2), Fault("GET", r"/a\.jsonl", status=500, count=1),
              Fault("GET", r"/a\.jsonl", cut_after=10, count=1))
    with FineWebLoader(_config(f"s3://{bucket}")) as loader:
        batches = [np.array(b) for b in loader]
        record = loader.stats()["source"]["object_store"]
    assert len(batches) == len(clean) and all(np.array_equal(a, b) for a, b in zip(batches, clean))
    retried = {k: v - before.get(k, 0) for k, v in record["retried"].items() if v - before.get(k, 0)}
    assert retried.pop("HTTP 503 SlowDown") == 2 and retried.pop("HTTP 500 InternalError") == 1
    assert sum(retried.values()) == 1, retried  # the cut body, under its client's name for it


@pytest.mark.parametrize("case", ["no bucket", "403", "no credentials", "no endpoint", "another region",
                                  "not S3"])
def test_each_store_failure_is_one_line_naming_the_url_or_variable_exit_4(s3, bucket, case, monkeypatch, not_s3):
    """smoke over a URL that cannot be read: exit 4 and one line saying why, naming the URL or the variable. Another
    region: moto serves every region, so the fault layer answers 301 PermanentRedirect without the bucket's region
    (what botocore cannot follow by itself); an endpoint that is not S3: a web server answering 404 pages."""
    url = f"s3://{bucket}/a.jsonl"
    expected = {"no bucket": "the bucket does not exist", "403": "access denied (HTTP 403 AccessDenied)",
                "no credentials": "no credentials to list", "no endpoint": "AWS_ENDPOINT_URL=http://127.0.0.1:9",
                "another region": "the bucket is in another region (PermanentRedirect): set AWS_REGION or "
                                  "--storage-option client_kwargs.region_name=REGION",
                "not S3": f"AWS_ENDPOINT_URL={not_s3.url} answered HTTP 404 with no S3 error"}
    if case == "no bucket":
        url = f"s3://fwe-missing-{uuid.uuid4().hex[:8]}/data"
    elif case == "another region":
        s3.faults(Fault("GET", bucket, status=301, count=99), Fault("HEAD", bucket, status=301, count=99))
    elif case == "not S3":
        monkeypatch.setenv("AWS_ENDPOINT_URL", not_s3.url)
    elif case == "403":
        s3.faults(Fault("GET", bucket, status=403, count=99), Fault("HEAD", bucket, status=403, count=99))
    elif case == "no credentials":
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    result = invoke("smoke", "--local-path", url, "--json", "--timeout", "30")
    data = one_object(result.stdout, 4)
    assert data["error"]["type"] == "LoaderError" or data["error"]["type"] == "SourceError"
    assert expected[case] in data["error"]["message"] and "\n" not in data["error"]["message"]
    assert case == "no endpoint" or url in data["error"]["message"]


def test_a_scheme_without_its_filesystem_is_a_usage_error_with_the_install_line():
    """az:// without adlfs installed: exit 2, one line with the pip install that adds it."""
    pytest.importorskip("fsspec")
    try:
        import adlfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.fail("this test needs adlfs absent (it is not in the test extra)")
    with pytest.raises(ConfigError, match=r"az:// URLs need the adlfs package.*pip install 'fwe\[azure\]'"):
        list(DocumentStream(_config("az://container/data")))


def test_an_object_replaced_mid_run_fails_the_read_naming_it(s3, bucket):
    """The listing saw b.jsonl's ETag; b.jsonl is replaced while a.jsonl is read: its first read (If-Match the listed
    ETag) fails in one line naming it, instead of reading another version."""
    stream = iter(DocumentStream(_config(f"s3://{bucket}")))
    assert next(stream).text == DOCS[0]
    s3.put(bucket, "b.jsonl", _jsonl(reversed(DOCS[60:])))
    with pytest.raises((SourceError, LoaderError), match=f"s3://{bucket}/b.jsonl was replaced after it was listed"):
        list(stream)


def test_fsspecs_memory_filesystem_reads_through_the_same_url_path(tmp_path):
    """gs://, az:// and hf:// go through the same code as s3:// (listing, range reads, units): fsspec's memory
    filesystem behind a memory:// URL gives the batches of the same files on disk, and resumes exactly."""
    from tests.loader.test_resume import assert_resumes

    root = f"memory://fwe-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    for name, texts in (("a.jsonl", DOCS[:60]), ("b.jsonl", DOCS[60:])):
        fs.pipe_file(f"{root}/{name}", _jsonl(texts))
        (tmp_path / name).write_bytes(_jsonl(texts))
    got, _ = pull(_config(root), 1000)
    want, _ = pull(_config(tmp_path), 1000)
    assert len(got) == len(want) > 5 and all(np.array_equal(a, b) for a, b in zip(got, want))
    assert_resumes(lambda **kw: _config(root, **kw), n=8, k=3)


def test_two_dataloader_workers_each_read_their_share_of_a_bucket(bucket):
    """StatefulDataLoader(num_workers=2) over s3://: the forked workers make their own client and are readers 0 and
    1 of 2: the batches are theirs in turn."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from fwe_cli.loader import FineWebDataset
    from tests.train.corpus import round_robin

    def config(readers=1, reader=0):
        return resolve_config(env={}, local_path=f"s3://{bucket}", tokenizer="byte", seq_len=8, batch_size=1,
                              shard_mod=readers, shard_rem=reader)

    got = [b.reshape(-1).tolist() for b in stateful.StatefulDataLoader(FineWebDataset(config()), batch_size=None,
                                                                        num_workers=2)]
    workers = []
    for worker in range(2):
        with FineWebLoader(config(2, worker)) as loader:
            workers.append([np.asarray(b).reshape(-1).tolist() for b in loader])
    assert got == round_robin(workers)

"""Object-store sources (an s3:// --local-path) against moto's S3 server (tests/s3sim): the same batches as the same
files on disk, for JSONL, TXT, parquet and gzip, a prefix, a glob and an object; exact resume, readers that each
fetch only their share, --where's ruled-out row groups never fetched, shuffle, elastic resume, a mix, a held-out
split, best-fit rows; and the state pins each object's version."""

from __future__ import annotations

import gzip
import io
import re
import time
import uuid

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from tests.loader.delivered import each_document_once
from tests.loader.test_readers import _config as _one_token_config
from tests.loader.test_readers import _tokens
from tests.loader.test_resume import assert_resumes, pull

DOCS = [synthetic_record(5, i) for i in range(240)]
SMALL = [f"<{i:03d}>" + "abcdefghij"[: 1 + i % 10] * (2 + i % 5) + f"</{i:03d}>" for i in range(150)]


def _jsonl(records) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def _parquet(records, row_group_size=17, **columns) -> bytes:
    buffer = io.BytesIO()
    table = pa.table({"text": [r["text"] for r in records], "id": [r.get("id", "") for r in records], **columns})
    pq.write_table(table, buffer, row_group_size=row_group_size)
    return buffer.getvalue()


def put_corpus(s3, root, bucket: str) -> None:
    """The 240 documents as JSONL (two files), TXT, parquet (row groups of 17) and JSONL.gz, in the bucket under
    jsonl/, txt/, parquet/, gz/ and the same files under `root` on disk."""
    s3.bucket(bucket)
    files = {"jsonl/a.jsonl": _jsonl(DOCS[:120]), "jsonl/b.jsonl": _jsonl(DOCS[120:]),
             "txt/docs.txt": "".join(d["text"].replace("\n", " ") + "\n" for d in DOCS).encode(),
             "parquet/docs.parquet": _parquet(DOCS), "gz/docs.jsonl.gz": gzip.compress(_jsonl(DOCS))}
    for key, data in files.items():
        s3.put(bucket, key, data)
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)


@pytest.fixture()
def corpus(s3, tmp_path):
    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    put_corpus(s3, tmp_path, bucket)
    return bucket, tmp_path


def _config(path, **kw):
    return resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=256, batch_size=4, **kw)


@pytest.mark.parametrize("kind", ["jsonl", "txt", "parquet", "gz"])
def test_an_s3_prefix_gives_the_batches_of_the_same_files_on_disk(corpus, kind):
    """Every format read from the bucket by range reads yields the batches of the same files read from disk."""
    bucket, root = corpus
    remote, _ = pull(_config(f"s3://{bucket}/{kind}"), 1000)
    local, _ = pull(_config(root / kind), 1000)
    assert len(remote) == len(local) > 10
    assert all(np.array_equal(a, b) for a, b in zip(remote, local))


def test_a_glob_and_a_single_object_name_what_they_name(corpus):
    """s3://bucket/jsonl/*.jsonl names both objects, s3://bucket/jsonl/b.jsonl one: the batches of the local paths."""
    bucket, root = corpus
    for remote, local in ((f"s3://{bucket}/jsonl/*.jsonl", root / "jsonl"),
                          (f"s3://{bucket}/jsonl/b.jsonl", root / "jsonl" / "b.jsonl")):
        got, _ = pull(_config(remote), 1000)
        want, _ = pull(_config(local), 1000)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "gz"])
def test_an_s3_source_resumes_exactly(corpus, kind):
    """Batches of one run == k batches, then the rest from a loader started at the state (Q, doc batch changed)."""
    bucket, _ = corpus
    assert_resumes(lambda **kw: _config(f"s3://{bucket}/{kind}", **kw))


def test_shuffled_best_fit_rows_resume_exactly(corpus):
    """Shuffled over 2 epochs with best-fit rows: a resume mid-epoch and across the epoch is exact."""
    bucket, _ = corpus
    assert_resumes(lambda **kw: _config(f"s3://{bucket}/jsonl", shuffle_seed=3, shuffle_window=40, epochs=2,
                                        pack="best-fit", pack_buffer=20, **kw), n=30, k=17)


def _ranges(requests) -> list[tuple[int, int]]:
    out = []
    for _method, path, header in requests:
        if "list-type=" in path:  # a listing, not a read of the object
            continue
        found = re.fullmatch(r"bytes=(\d+)-(\d+)", header or "")
        assert found, header  # every read of an object is a range read
        out.append((int(found[1]), int(found[2]) + 1))
    return out


def test_three_readers_each_fetch_their_share_and_deliver_every_document_once(s3, monkeypatch):
    """3 readers of two JSONL objects: each document once over the three, and each reader's range reads add up to at
    most its third of the bytes and the line in progress at its end (read in steps of TAIL_BYTES, made small here),
    none read twice."""
    from fwe_cli.loader.remote import range_file

    monkeypatch.setattr(range_file, "TAIL_BYTES", 32)
    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(bucket)
    s3.put(bucket, "a.jsonl", _jsonl({"text": t} for t in SMALL[:90]))
    s3.put(bucket, "b.jsonl", _jsonl({"text": t} for t in SMALL[90:]))
    total = sum(len(orjson.dumps({"text": t})) + 1 for t in SMALL)
    streams = []
    for reader in range(3):
        s3.clear_log()
        with FineWebLoader(_one_token_config(f"s3://{bucket}", 3, reader)) as loader:
            streams.append(_tokens(loader))
        fetched = _ranges(s3.requests("GET", r"\.jsonl"))
        assert sum(b - a for a, b in fetched) <= total / 3 + 2 * 32 + 60, fetched
        assert len(set(fetched)) == len(fetched)
    each_document_once(SMALL, streams)


def test_a_where_filter_never_fetches_the_row_groups_it_rules_out(s3):
    """--where int_score >= 3 over a parquet object whose row groups hold one score each: no range read touches the
    column chunks of a ruled-out row group, and the documents are those that pass."""
    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(bucket)
    rng = np.random.default_rng(0)  # incompressible text: the ruled-out row groups lie before the footer's read
    records = [{"text": f"doc {i} " + rng.bytes(1500).hex(), "id": f"d{i}"} for i in range(120)]
    scores = [i // 20 for i in range(120)]  # row groups of 20: scores 0..5, one per row group
    s3.put(bucket, "scored.parquet", _parquet(records, row_group_size=20, int_score=scores))
    metadata = pq.ParquetFile(io.BytesIO(s3.get(bucket, "scored.parquet"))).metadata
    from fwe_cli.loader.remote.parquet_spans import column_span

    ruled_out = [column_span(rg, ["text", "id", "int_score"])
                 for rg in (metadata.row_group(g) for g in range(metadata.num_row_groups))
                 if rg.column(2).statistics.max < 3]
    assert len(ruled_out) == 3
    from fwe_cli.loader.stream import DocumentStream

    texts = [d.text for d in DocumentStream(_config(f"s3://{bucket}/scored.parquet", where="int_score >= 3"))]
    assert texts == [r["text"] for r, s in zip(records, scores) if s >= 3]
    for start, end in _ranges(s3.requests("GET", "scored.parquet")):
        assert all(end <= lo or start >= hi for lo, hi in ruled_out), (start, end, ruled_out)


def test_a_parquet_share_is_read_in_few_gets_of_consecutive_row_groups(s3):
    """A reader's row groups come in GETs of consecutive row groups (the first alone, then up to 512 KiB, 2 MiB and
    8 MiB: files.object_parquet.run_bytes), not one GET per row group: 60 row groups of ~5 KB cost two GETs beside
    the footer's, the first ending where the first row group does; no byte fetched twice; the documents those of the
    file."""
    from fwe_cli.loader.files.object_parquet import run_bytes
    from fwe_cli.loader.remote.parquet_spans import column_span
    from fwe_cli.loader.stream import DocumentStream

    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(bucket)
    rng = np.random.default_rng(1)
    records = [{"text": f"doc {i} " + rng.bytes(400).hex(), "id": f"d{i}"} for i in range(240)]
    data = _parquet(records, row_group_size=4)
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    footer_at = len(data) - 8 - metadata.serialized_size
    assert metadata.num_row_groups == 60 and footer_at < run_bytes(1)
    s3.put(bucket, "many.parquet", data)
    s3.clear_log()
    texts = [d.text for d in DocumentStream(_config(f"s3://{bucket}/many.parquet"))]
    assert texts == [r["text"] for r in records]
    fetched = sorted(_ranges(s3.requests("GET", "many.parquet")))
    rows = [(a, b) for a, b in fetched if a < footer_at]  # the rest read the footer (a suffix, then what it lacks)
    assert len(rows) == 2 and rows[0][1] == column_span(metadata.row_group(0), ["text", "id"])[1], rows
    assert all(a[1] <= b[0] for a, b in zip(fetched, fetched[1:])), fetched


def test_the_next_parquet_object_is_opened_before_the_reader_reaches_it(s3):
    """Two parquet objects read in turn: once the reader has asked for its last GET of the first, the second's
    footer and first row group are fetched in the background, before the reader takes a document of it (so moving
    on to it costs no round trip); the documents are both objects' in order."""
    from fwe_cli.loader.stream import DocumentStream

    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(bucket)
    s3.put(bucket, "d/a.parquet", _parquet(DOCS[:120], row_group_size=10))
    s3.put(bucket, "d/b.parquet", _parquet(DOCS[120:], row_group_size=10))
    stream = iter(DocumentStream(_config(f"s3://{bucket}/d")))
    first = [next(stream).text for _ in range(120)]  # every document of a.parquet, none of b's yet
    assert first == [d["text"] for d in DOCS[:120]]
    deadline = time.monotonic() + 30
    while len(s3.requests("GET", "b.parquet")) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # polled: the background fetch's requests, as the store logged them
    assert len(s3.requests("GET", "b.parquet")) >= 2, s3.requests("GET", "b.parquet")
    rest = [d.text for d in stream]
    assert rest == [d["text"] for d in DOCS[120:]]


@pytest.mark.parametrize("shuffle", [None, 11])
def test_four_readers_resume_as_three_delivering_every_document_once(s3, shuffle):
    """Elastic resume over an object store: 4 readers stop at different places and save; 3 readers given the four
    states read the rest: every document once over both worlds."""
    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(bucket)
    s3.put(bucket, "docs.jsonl", _jsonl({"text": t} for t in SMALL))
    kw = {} if shuffle is None else {"shuffle_seed": shuffle, "shuffle_window": 8}
    first, states = [], []
    for rank, limit in enumerate([90, 40, 130, 12]):
        with FineWebLoader(_one_token_config(f"s3://{bucket}", 4, rank, **kw)) as loader:
            first.append(_tokens(loader, limit))
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    second = []
    for rank in range(3):
        with FineWebLoader(_one_token_config(f"s3://{bucket}", 3, rank, **kw), state=states) as loader:
            second.append(_tokens(loader))
    each_document_once(SMALL, first, second)


def test_a_mix_file_and_a_held_out_split_read_urls(s3, tmp_path):
    """A mix file whose local_path is an s3:// URL (beside a local file), and --holdout over a URL: the mix holds
    both sources' documents; the two sides of the split partition the object's documents."""
    from fwe_cli.loader.stream import DocumentStream

    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(bucket)
    s3.put(bucket, "docs.jsonl", _jsonl({"text": t} for t in SMALL))
    local = tmp_path / "local.jsonl"
    local.write_bytes(_jsonl({"text": f"local {i}"} for i in range(50)))
    mix = tmp_path / "mix.json"
    mix.write_bytes(orjson.dumps({"by": "documents", "sources": [
        {"weight": 0.5, "local_path": f"s3://{bucket}/docs.jsonl"}, {"weight": 0.5, "local_path": str(local)}]}))
    texts = [d.text for d in DocumentStream(resolve_config(env={}, mix=str(mix), tokenizer="byte"))]
    assert any(t.startswith("<") for t in texts) and any(t.startswith("local") for t in texts)
    sides = {side: [d.text for d in DocumentStream(_config(f"s3://{bucket}", holdout="0.2", holdout_split=side))]
             for side in ("train", "holdout")}
    assert sorted(sides["train"] + sides["holdout"]) == sorted(SMALL) and sides["holdout"]


def test_a_state_refuses_an_object_replaced_since_naming_it(corpus, s3):
    """A state saved over the bucket's objects is refused once one of them is replaced (its ETag changed), in one
    line naming the object; the same bytes put again keep the ETag and the state resumes."""
    bucket, root = corpus
    _, state = pull(_config(f"s3://{bucket}/jsonl"), 3)
    s3.put(bucket, "jsonl/b.jsonl", (root / "jsonl" / "b.jsonl").read_bytes())
    pull(_config(f"s3://{bucket}/jsonl"), 2, state)
    s3.put(bucket, "jsonl/b.jsonl", _jsonl(DOCS[120:200]))
    with pytest.raises(ConfigError, match=f"s3://{bucket}/jsonl/b.jsonl differs"):
        pull(_config(f"s3://{bucket}/jsonl"), 2, state)

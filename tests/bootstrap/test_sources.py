"""What bootstrap copies: shards, bad records, --fields, resumable positions of every source kind, the part
writer's replay, and the loader's own reading of the same files (unchanged by the record readers)."""

from __future__ import annotations

import hashlib
import signal
from collections import Counter
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.loader.config import Shard, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.loader.sources.registry import open_source
from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.output.part_writer import PartWriter
from tests.bootstrap.support import cli, core_run, killed_at, lines_of, manifest_of
from tests.helpers import write_jsonl


@pytest.fixture()
def messy_jsonl(tmp_path) -> Path:
    """301 good records (one without an id) with three bad lines and a blank line among them."""
    path = write_jsonl(tmp_path / "src.jsonl", [synthetic_record(5, i) for i in range(300)])
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(10, b"{not json\n")
    lines.insert(50, b'{"id": "no-text"}\n')
    lines.insert(90, b"\n")
    lines.insert(120, b'{"text": 42}\n')
    lines.append(b'{"text": "last one, no id"}\n')
    path.write_bytes(b"".join(lines))
    return path


def test_shards_together_hold_the_unsharded_documents_once(tmp_path, messy_jsonl):
    """Shards 0..3 of --shard-mod 4 hold exactly the documents of the unsharded run, each exactly once, and the
    CLI's --shard-mod/--shard-rem select the same shard as the library."""
    whole = core_run(tmp_path / "all", gb=1, local_path=str(messy_jsonl), file_mb=0.2)
    assert whole["source_exhausted"] is True and whole["documents"] == 301
    everything = lines_of(tmp_path / "all")
    shards = []
    for rem in range(4):
        core_run(tmp_path / f"s{rem}", gb=1, local_path=str(messy_jsonl), file_mb=0.2, shard_mod=4, shard_rem=rem)
        shards.append(lines_of(tmp_path / f"s{rem}"))
    assert all(shards) and max(map(len, shards)) - min(map(len, shards)) <= 1
    union = Counter(line for shard in shards for line in shard)
    assert union == Counter(everything) and max(union.values()) == 1
    assert shards[1] == everything[1::4]
    via_cli = cli("--gb", "1", "--local-path", str(messy_jsonl), "--file-mb", "0.2", "--shard-mod", "4",
                  "--shard-rem", "1", "--out", str(tmp_path / "cli1"), tmp=tmp_path)
    assert via_cli.exit_code == 0, via_cli.stderr
    assert lines_of(tmp_path / "cli1") == shards[1] and manifest_of(tmp_path / "cli1")["shard"] == {
        "mod": 4, "rem": 1, "by": "document", "from": "flags"}


def test_bad_records_are_counted_in_the_manifest(tmp_path, messy_jsonl):
    """Bad JSON, a missing text and a non-string text are skipped, counted and named (file:line) in the
    manifest and the summary; blank lines are not records; --bad-records error stops at the first (exit 4)."""
    out = tmp_path / "out"
    result = cli("--gb", "1", "--local-path", str(messy_jsonl), "--out", str(out), tmp=tmp_path)
    assert result.exit_code == 0, result.stderr
    bad = manifest_of(out)["bad_records"]
    assert bad["count"] == 3
    assert bad["examples"][0].startswith(f"{messy_jsonl}:11: bad JSON (")
    assert bad["examples"][1:] == [f"{messy_jsonl}:51: missing field 'text'",
                                   f"{messy_jsonl}:121: 'text' is int, not a string"]
    assert "3 skipped" in result.stderr
    strict = cli("--gb", "1", "--local-path", str(messy_jsonl), "--bad-records", "error",
                 "--out", str(tmp_path / "strict"), tmp=tmp_path)
    assert strict.exit_code == 4 and f"{messy_jsonl}:11: bad JSON" in strict.stderr


def test_fields_all_copies_local_lines_as_they_are(tmp_path, messy_jsonl):
    """--fields all keeps every good source line byte for byte; --fields text keeps text and id (id only where the
    record has one)."""
    core_run(tmp_path / "all", gb=1, local_path=str(messy_jsonl), fields="all")
    source_good = [line for line in messy_jsonl.read_bytes().splitlines(keepends=True)
                   if line.startswith(b'{"text":"') or line == b'{"text": "last one, no id"}\n']
    assert lines_of(tmp_path / "all") == source_good
    core_run(tmp_path / "text", gb=1, local_path=str(messy_jsonl), fields="text")
    records = [orjson.loads(line) for line in lines_of(tmp_path / "text")]
    assert set(records[0]) == {"text", "id"} and records[-1] == {"text": "last one, no id"}


def test_fields_all_from_synthetic_has_the_ten_fineweb_edu_fields(tmp_path):
    """A synthetic bootstrap with --fields all writes the full FineWeb-Edu record, identical to synthetic_record."""
    core_run(tmp_path / "out", gb=0.0005, source="synthetic", seed=9, fields="all")
    first = orjson.loads(lines_of(tmp_path / "out")[0])
    assert first == synthetic_record(9, 0) and len(first) == 10


def test_a_changed_local_source_is_not_resumed(tmp_path, messy_jsonl):
    """If the source file changes between an interruption and the re-run, resuming is refused (exit 8)."""
    out = tmp_path / "out"
    killed = killed_at("part-renamed:1", "--gb", "1", "--local-path", str(messy_jsonl), "--file-mb", "0.2",
                       "--out", str(out), tmp=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with open(messy_jsonl, "ab") as handle:
        handle.write(b'{"text": "appended later"}\n')
    again = cli("--gb", "1", "--local-path", str(messy_jsonl), "--file-mb", "0.2", "--out", str(out), tmp=tmp_path)
    assert again.exit_code == 8 and "local source changed" in again.stderr


def _records(spec: SourceSpec, shard: Shard = Shard(), start: dict | None = None, all_fields: bool = False):
    """The source's Records, as `fwe bootstrap` reads them."""
    return open_source(spec, ReadOptions()).records(shard, start=start, all_fields=all_fields)


def _resumes_exactly(spec: SourceSpec, shard: Shard = Shard(), limit: int = 60, all_fields: bool = False) -> None:
    """From the position saved after any record, a new stream yields exactly the records that followed."""
    stream = _records(spec, shard, all_fields=all_fields)
    seen, positions = [], []
    for record, _raw in stream:
        seen.append(record)
        positions.append(stream.position())
        if len(seen) == limit:
            break
    assert len(seen) >= 20
    for k in (0, 7, len(seen) // 2, len(seen) - 2):
        resumed = _records(spec, shard, orjson.loads(orjson.dumps(positions[k])), all_fields)
        again = [record for record, _raw in _take(resumed, len(seen) - k - 1)]
        assert again == seen[k + 1:], f"resume after record {k}"


def _take(stream, n):
    out = []
    for item in stream:
        if len(out) == n:
            break
        out.append(item)
    return out


def test_local_positions_resume_exactly(tmp_path, messy_jsonl):
    """JSONL (with bad lines), TXT, parquet and a directory of several files resume at the saved position."""
    _resumes_exactly(SourceSpec.of("local", local_path=str(messy_jsonl)), limit=200)
    txt = tmp_path / "t" / "a.txt"
    txt.parent.mkdir()
    txt.write_text("".join(f"document {i}\n" + ("\n" if i % 5 == 0 else "") for i in range(40)))
    table = pa.table({"text": [f"row {i}" if i % 9 else None for i in range(45)], "id": [f"r{i}" for i in range(45)]})
    pq.write_table(table, tmp_path / "t" / "b.parquet", row_group_size=10)
    _resumes_exactly(SourceSpec.of("local", local_path=str(txt.parent)), Shard(3, 2), limit=200)
    _resumes_exactly(SourceSpec.of("local", local_path=str(tmp_path / "t" / "b.parquet")), all_fields=True)


def test_synthetic_positions_resume_exactly():
    """The synthetic stream, sharded, resumes at the saved index."""
    _resumes_exactly(SourceSpec.of("synthetic", seed=4), Shard(4, 3), limit=30)


def test_hub_positions_resume_exactly(monkeypatch):
    """The Hub reader (fed an in-memory streaming dataset in place of the network) counts rows without text as
    bad records and resumes from `datasets`' state_dict, and from a row count when there is no state."""
    from datasets import Dataset

    rows = {"text": [None if i % 11 == 3 else f"hub doc {i}" for i in range(90)], "id": [f"h{i}" for i in range(90)]}
    monkeypatch.setattr("fwe_cli.loader.hub.streaming.open_hub_stream",
                        lambda *a, **k: Dataset.from_dict(rows).to_iterable_dataset(num_shards=3))
    monkeypatch.setattr("fwe_cli.loader.hub.streaming.hub_revision", lambda dataset, revision=None: "b" * 40)
    spec = SourceSpec.of("hub", dataset="test/in-memory", hub_reader="datasets")
    _resumes_exactly(spec, Shard(2, 1), limit=40)
    stream = _records(spec, Shard(2, 1))
    records = [record for record, _ in stream]
    assert stream.bad.count == 8 and len(records) == (90 - 8) // 2 + ((90 - 8) % 2)
    position = dict(stream.position(), state=None)
    later = _records(spec, Shard(2, 1), {"index": 10, "rows": 11, "state": None})
    assert [r for r, _ in later][0]["text"] == "hub doc 12"
    assert position["rows"] == 90


def test_part_writer_replay_keeps_intact_lines_and_cuts_a_torn_one(tmp_path):
    """Reopened after a crash, the writer trusts the checkpointed bytes, confirms the following lines that match
    what is regenerated, cuts the file at the first that does not, and the final sha256 is the file's."""
    lines = [orjson.dumps({"text": f"line {i}" * (i % 7 + 1)}) + b"\n" for i in range(400)]
    partial, final = tmp_path / "p.jsonl.partial", tmp_path / "p.jsonl"
    writer = PartWriter(str(partial), str(final))
    for line in lines[:100]:
        writer.add(line)
    writer.sync()
    valid = writer.size
    for line in lines[100:250]:
        writer.add(line)
    writer.sync()
    writer.close()
    with open(partial, "ab") as handle:
        handle.write(lines[250][:5])  # a torn record
    writer = PartWriter(str(partial), str(final), valid_bytes=valid, valid_lines=100, resume=True)
    for line in lines[100:]:
        writer.add(line)
    entry = writer.finish()
    assert writer.replayed_lines == 150 and writer.discarded_bytes == 5
    data = final.read_bytes()
    assert data == b"".join(lines) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert entry["lines"] == 400 and not partial.exists()


@pytest.mark.parametrize("fadvise_fails", [False, True])
def test_part_writer_threads_hash_and_write_every_chunk_in_order(tmp_path, monkeypatch, fadvise_fails):
    """With small chunks and an early-writeback step every few chunks, the hasher and writer threads see every
    chunk once and in order: the file is the lines joined and its sha256 is the manifest's, also when the
    early-writeback hint fails (it is only a speed-up)."""
    import fwe_cli.output.part_writer as part_writer

    monkeypatch.setattr(part_writer, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(part_writer, "WRITEBACK_BYTES", 3 * 4096)
    hints = []

    def fadvise(fd, offset, length, advice):
        hints.append((offset, length))
        if fadvise_fails:
            raise OSError(22, "Invalid argument")

    monkeypatch.setattr(part_writer.os, "posix_fadvise", fadvise, raising=False)
    monkeypatch.setattr(part_writer, "_START_WRITEBACK", True)
    lines = [orjson.dumps({"text": f"doc {i} " * (i % 50 + 1)}) + b"\n" for i in range(2000)]
    final = tmp_path / "p.jsonl"
    writer = PartWriter(str(tmp_path / "p.jsonl.partial"), str(final))
    for line in lines:
        writer.add(line)
    entry = writer.finish()
    data = b"".join(lines)
    assert len(data) > 40 * 4096 and len(hints) >= 10  # many chunks and hints, or this proves nothing
    assert [offset for offset, _ in hints] == [0] + [sum(h[:2]) for h in hints[:-1]]  # contiguous ranges
    assert final.read_bytes() == data and entry["sha256"] == hashlib.sha256(data).hexdigest()

def test_loader_reads_local_files_as_before(tmp_path, messy_jsonl):
    """The loader's documents from JSONL, TXT and parquet: text and id (record id, else file:line or file:row),
    bad records counted -- the record readers share the scanning code without changing what the loader sees."""
    stream = DocumentStream(resolve_config(local_path=str(messy_jsonl)))
    docs = list(stream)
    assert len(docs) == 301 and stream.bad.count == 3
    assert docs[0].id == synthetic_record(5, 0)["id"] and docs[-1].id == f"{messy_jsonl}:305"
    txt = tmp_path / "a.txt"
    txt.write_text("one\n\ntwo\r\n")
    assert [(d.text, d.id) for d in DocumentStream(resolve_config(local_path=str(txt)))] == [
        ("one", f"{txt}:1"), ("two", f"{txt}:3")]
    pq.write_table(pa.table({"text": ["a", None, "c"]}), tmp_path / "b.parquet")
    stream = DocumentStream(resolve_config(local_path=str(tmp_path / "b.parquet")))
    assert [(d.text, d.id) for d in stream] == [("a", f"{tmp_path}/b.parquet:row1"), ("c", f"{tmp_path}/b.parquet:row3")]
    assert stream.bad.to_dict()["examples"] == [f"{tmp_path}/b.parquet:row2: 'text' is null"]


def test_bad_records_carry_over_a_resume():
    """BadRecords restored from a checkpoint keep counting from where they were."""
    bad = BadRecords(**BadRecords(count=2, examples=["a:1: x", "a:2: y"]).to_dict())
    bad.add("a:9", "z")
    assert bad.to_dict() == {"count": 3, "examples": ["a:1: x", "a:2: y", "a:9: z"]}


def test_hub_bootstrap_records_and_pins_the_revision_across_a_resume(tmp_path, monkeypatch):
    """A Hub bootstrap (in-memory dataset standing in for the network) records the revision sha in the manifest,
    opens the stream at that revision again when resumed after an interruption, and ends identical to an
    uninterrupted run."""
    from datasets import Dataset

    rows = {"text": [f"hub document {i} " * (i % 13 + 1) for i in range(3000)], "id": [f"h{i}" for i in range(3000)]}
    opened = []

    def fake_open(dataset, name, split, revision=None, all_columns=False, where=None):
        opened.append(revision)
        return Dataset.from_dict(rows).to_iterable_dataset(num_shards=4)

    monkeypatch.setattr("fwe_cli.loader.hub.streaming.open_hub_stream", fake_open)
    monkeypatch.setattr("fwe_cli.loader.hub.streaming.hub_revision",
                        lambda dataset, revision=None: revision or "0123abcd" * 5)
    flags = dict(gb=0.0004, file_mb=0.1, dataset="test/in-memory", hub_reader="datasets")
    whole = core_run(tmp_path / "whole", **flags)
    assert whole["complete"] and whole["files"] >= 3 and manifest_of(tmp_path / "whole")["revision"] == "0123abcd" * 5
    calls = iter(range(10**6))
    stopped = run_bootstrap(bootstrap_config(out=str(tmp_path / "resumed"), **flags),
                            should_stop=lambda: next(calls) >= 5)
    assert stopped["outcome"] == "interrupted" and 0 < stopped["bytes"] < whole["bytes"]
    assert manifest_of(tmp_path / "resumed")["resume"]["position"]["state"] is not None
    done = core_run(tmp_path / "resumed", **flags)
    assert done["complete"] and done["resumed_from_bytes"] == stopped["bytes"]
    assert opened[-1] == "0123abcd" * 5 and len(opened) == 3
    assert manifest_of(tmp_path / "resumed")["files"] == manifest_of(tmp_path / "whole")["files"]
    assert [run["revision_pinned"] for run in manifest_of(tmp_path / "resumed")["runs"]] == [True, True]


def test_hub_endpoint_that_cannot_serve_the_sha_fails_instead_of_reading_its_default_branch(tmp_path, monkeypatch):
    """If the endpoint names a commit but cannot open the dataset at it, the bootstrap fails with that error: it
    never opens the default branch (perhaps another commit) in its place."""
    from datasets import Dataset

    from fwe_cli.errors import SourceError

    opened = []

    def fake_open(dataset, name, split, revision=None, all_columns=False, where=None):
        opened.append(revision)
        if revision is not None:
            raise SourceError(f"no such revision {revision}")
        return Dataset.from_dict({"text": ["a", "b", "c"]}).to_iterable_dataset()

    monkeypatch.setattr("fwe_cli.loader.hub.streaming.open_hub_stream", fake_open)
    monkeypatch.setattr("fwe_cli.loader.hub.streaming.hub_revision", lambda dataset, revision=None: "f" * 40)
    with pytest.raises(SourceError, match=f"no such revision {'f' * 40}"):
        core_run(tmp_path / "out", gb=1, dataset="test/in-memory", hub_reader="datasets")
    assert opened == ["f" * 40]

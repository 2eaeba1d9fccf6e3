"""A row filter (--where) on local files and the synthetic source: JSONL keeps what Python's own filter keeps,
parquet what pyarrow's keeps without reading the row groups its statistics rule out, the synthetic source its
passing records; positions stay exact inside a filtered stream, bootstrap's records are the same documents, and a
source that cannot be filtered, or lacks a column, is refused naming it."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.registry import open_source
from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec
from tests.helpers import read_whole, write_jsonl
from tests.hubsim.repos import SCHEMA, scored_row_group
from tests.loader.test_resume import assert_resumes
from tests.loader.token_dirs import write_token_dir

WHERE = "int_score >= 3 and language_score > 0.85"


def passes(record: dict) -> bool:
    return record["int_score"] >= 3 and record["language_score"] > 0.85


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """The same 240 records as two JSONL files and as one parquet file of 8 row groups of 30 rows, every odd row
    group scored below 2.5 throughout (the test Hub's `scored` rows)."""
    folder = tmp_path_factory.mktemp("scored")
    groups = [scored_row_group(3, g, 30) for g in range(8)]
    records = [r for table in groups for r in table.to_pylist()]
    (folder / "jsonl").mkdir()
    write_jsonl(folder / "jsonl" / "a.jsonl", records[:100])
    write_jsonl(folder / "jsonl" / "b.jsonl", records[100:])
    with pq.ParquetWriter(folder / "rows.parquet", SCHEMA) as writer:
        for table in groups:
            writer.write_table(table, row_group_size=30)
    return folder, records


def _read(path, where: str | None = WHERE, at=None):
    source = open_source(SourceSpec.of("local", local_path=str(path), where=where), ReadOptions())
    source.open(lambda stage: None)
    return source, [(doc.text, doc.id, after) for doc, after in read_whole(source, at)]


def test_jsonl_keeps_what_pythons_own_filter_keeps(scored):
    """Over two JSONL files the documents are exactly the passing records, in order, and the source counts the
    rest; no row group is skipped (JSONL has none)."""
    folder, records = scored
    source, docs = _read(folder / "jsonl")
    want = [(r["text"], r["id"]) for r in records if passes(r)]
    assert [(t, i) for t, i, _ in docs] == want and 0 < len(want) < len(records)
    assert source.describe()["filtered"] == {"documents": len(records) - len(want), "row_groups": 0}


def test_parquet_keeps_pyarrows_rows_and_reads_no_ruled_out_row_group(scored, tmp_path):
    """Parquet keeps exactly the rows pyarrow's filter keeps; the row groups whose statistics rule every row out
    are not read: with their bytes overwritten by garbage the stream is the same, while an unfiltered read of that
    file fails."""
    folder, _ = scored
    path = tmp_path / "damaged.parquet"
    path.write_bytes((folder / "rows.parquet").read_bytes())
    metadata = pq.read_metadata(path)
    ruled_out = [g for g in range(metadata.num_row_groups) if metadata.row_group(g).column(9).statistics.max < 3]
    assert len(ruled_out) == 4
    with open(path, "r+b") as handle:
        for group in ruled_out:
            chunks = [metadata.row_group(group).column(j) for j in range(metadata.num_columns)]
            start = min(c.dictionary_page_offset or c.data_page_offset for c in chunks)
            end = max((c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size for c in chunks)
            handle.seek(start)
            handle.write(b"\xff" * (end - start))
    table = pq.read_table(folder / "rows.parquet").filter((pc.field("int_score") >= 3)
                                                          & (pc.field("language_score") > 0.85))
    source, docs = _read(path)
    assert [(t, i) for t, i, _ in docs] == list(zip(table.column("text").to_pylist(), table.column("id").to_pylist()))
    assert source.describe()["filtered"] == {"documents": metadata.num_rows - table.num_rows, "row_groups": 4}
    with pytest.raises(Exception):
        _read(path, where=None)


@pytest.mark.parametrize("name", ["jsonl", "rows.parquet"])
def test_every_position_inside_a_filtered_stream_resumes_exactly(scored, name):
    """Opened at the cursor of any document, the source yields exactly that document and those that followed it."""
    folder, _ = scored
    _, docs = _read(folder / name)
    for k in range(len(docs) - 1):
        assert _read(folder / name, at=docs[k][2])[1] == docs[k:], k


@pytest.mark.parametrize("name", ["jsonl", "rows.parquet"])
def test_a_filtered_local_stream_resumes_exactly_through_the_loader(scored, name):
    """The loader over a filtered local source resumes byte for byte, plain and sharded with a shuffle."""
    folder, _ = scored

    def make(**kw):
        return resolve_config(env={}, local_path=str(folder / name), where=WHERE, tokenizer="byte", seq_len=256,
                              batch_size=2, **kw)

    assert_resumes(make, n=30, k=11)
    assert_resumes(lambda **kw: make(shard_mod=3, shard_rem=2, shuffle_seed=4, shuffle_window=7, epochs=2, **kw),
                   n=20, k=9)


def test_the_synthetic_source_keeps_its_passing_records_and_resumes_exactly():
    """--source synthetic --where yields the passing records of the stream, and resumes exactly, also sharded."""
    source = open_source(SourceSpec.of("synthetic", seed=2, where=WHERE), ReadOptions())
    docs = [(doc.text, doc.id) for (doc, _after), _ in zip(read_whole(source), range(40))]
    want = [(r["text"], r["id"]) for r in (synthetic_record(2, i) for i in range(400)) if passes(r)][:40]
    assert docs == want
    make = lambda **kw: resolve_config(env={}, source="synthetic", seed=2, where=WHERE, tokenizer="byte",  # noqa
                                       seq_len=256, batch_size=2, **kw)
    assert_resumes(make, n=20, k=7)
    assert_resumes(lambda **kw: make(shard_mod=2, shard_rem=1, **kw), n=12, k=5)


@pytest.mark.parametrize("spec", [SourceSpec.of("local", local_path="{jsonl}", where=WHERE),
                                  SourceSpec.of("local", local_path="{parquet}", where=WHERE),
                                  SourceSpec.of("synthetic", seed=3, where=WHERE)])
def test_bootstraps_records_are_the_loaders_documents_shard_by_shard(scored, spec):
    """`Source.records` (what `fwe bootstrap` copies) keeps the passing records, numbered among themselves: shard r
    of 2 holds passing records r, r + 2, ... (the loader's rule), and a records stream reopened at its position
    after any record continues with the next one."""
    folder, records = scored
    if spec.kind == "local":
        path = spec.options.local_path.format(jsonl=folder / "jsonl", parquet=folder / "rows.parquet")
        spec = spec.with_options(local_path=path)
        want = [r["id"] for r in records if passes(r)]
    else:
        want = [r["id"] for r in (synthetic_record(3, i) for i in range(200)) if passes(r)]
    for rem in range(2):
        records = open_source(spec, ReadOptions()).records(Shard(2, rem))
        got = [record["id"] for (record, _line), _ in zip(records, range(20))]
        assert got == want[rem::2][:20] and len(got) == 20, rem
    records = open_source(spec, ReadOptions()).records(Shard(2, 1))
    for k, _ in enumerate(records):
        if k == 4:
            at = records.position()
            break
    resumed = open_source(spec, ReadOptions()).records(Shard(2, 1), start=at)
    assert next(iter(resumed))[0]["id"] == want[1::2][5]


def test_a_record_lacking_a_filtered_field_or_of_another_type_is_named(tmp_path):
    """A JSONL record lacking a field the filter names is a ConfigError naming the field and the line (the first
    record is checked as the source opens); a null is not a match; a value of another type than its literal is
    a ConfigError naming the line."""
    rows = [{"text": "a", "int_score": 3, "language_score": 0.9}, {"text": "b", "int_score": None,
                                                                   "language_score": 0.9}]
    source, docs = _read(write_jsonl(tmp_path / "nulls.jsonl", rows))
    assert [t for t, _, _ in docs] == ["a"] and source.describe()["filtered"]["documents"] == 1
    with pytest.raises(ConfigError, match=r"'language_score'.*first\.jsonl:1"):
        open_source(SourceSpec.of("local", local_path=str(write_jsonl(tmp_path / "first.jsonl", [{"text": "a",
                    "int_score": 3}])), where=WHERE), ReadOptions()).open(lambda stage: None)
    with pytest.raises(ConfigError, match=r"'int_score'.*later\.jsonl:2"):
        _read(write_jsonl(tmp_path / "later.jsonl", [rows[0], {"text": "c", "language_score": 0.9}]))
    with pytest.raises(ConfigError, match=r"compares 'int_score' with a number.*typed\.jsonl:2 holds str"):
        _read(write_jsonl(tmp_path / "typed.jsonl", [rows[0], dict(rows[0], int_score="3")]))


def test_sources_without_fields_refuse_a_filter(scored, tmp_path):
    """TXT files and a token directory have no fields: a filter on them is a ConfigError naming the path (a TXT file
    named as such is refused by its name, one found in a folder as it opens); a
    parquet file without the column is one naming the column and the file."""
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "docs.txt").write_text("one\ntwo\n")
    with pytest.raises(ConfigError, match=r"where .*docs\.txt is TXT"):  # by its name, before it opens
        _read(tmp_path / "texts" / "docs.txt")
    with pytest.raises(ConfigError, match=r"--where .*docs\.txt is TXT"):  # in a folder: as it opens
        _read(tmp_path / "texts")
    tokens = write_token_dir(tmp_path / "tokens", ["one", "two"], "byte", 10)
    with pytest.raises(ConfigError, match=r"--where .*token directory"):
        _read(tokens)
    pq.write_table(pa.table({"text": ["x"], "score": [1.0]}), tmp_path / "few.parquet")
    with pytest.raises(ConfigError, match=r"'int_score'.*few\.parquet lacks"):
        _read(tmp_path / "few.parquet")

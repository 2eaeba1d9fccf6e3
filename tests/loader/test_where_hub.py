"""A row filter (--where) on the Hub, against the test Hub's `scored` config (small row groups, every odd one scored
below 2.5 throughout, with min/max statistics as FineWeb-Edu's files have them): the rows kept are pyarrow's own
filter's, in order; a row group the statistics rule out is never fetched; positions stay exact inside the filtered
stream; the warm head cache and the kept first batches never serve another filter's rows."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import orjson
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.hub.ranges import FOOTER_PROBE
from fwe_cli.loader.sources.registry import open_source
from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec
from tests.helpers import REPO_ROOT, read_whole
from tests.hubsim.repos import DATASET_REPO, SCORED_CONFIG, SCORED_DIR
from tests.loader.test_resume import assert_resumes, pull

WHERE = "int_score >= 3"


def _files(hubsim_root) -> list:
    return sorted((hubsim_root / "datasets" / DATASET_REPO / SCORED_DIR).glob("*.parquet"))


def _spec(where: str | None = WHERE, reader: str = "native") -> SourceSpec:
    return SourceSpec.of("hub", dataset=DATASET_REPO, name=SCORED_CONFIG, hub_reader=reader, where=where)


def _read(spec: SourceSpec, hub_cache: bool = False, at=None):
    """(the opened source, [(text, id, position after it)] of its whole stream from `at`)."""
    source = open_source(spec, ReadOptions(hub_cache=hub_cache))
    source.open(lambda stage: None)
    try:
        docs = [(doc.text, doc.id, after) for doc, after in read_whole(source, at)]
    finally:
        source.close()
    return source, docs


def _pyarrow_rows(hubsim_root, expression) -> list[tuple[str, str]]:
    rows = []
    for path in _files(hubsim_root):
        table = pq.read_table(path).filter(expression)
        rows += zip(table.column("text").to_pylist(), table.column("id").to_pylist())
    return rows


def _group_bytes(metadata, group: int) -> tuple[int, int]:
    """[start, end) of every column chunk of a row group."""
    row_group = metadata.row_group(group)
    chunks = [row_group.column(j) for j in range(row_group.num_columns)]
    starts = [min(c.data_page_offset, c.dictionary_page_offset or c.data_page_offset) for c in chunks]
    return min(starts), max(s + c.total_compressed_size for s, c in zip(starts, chunks))


def _row_group_reads(requests, path) -> list[tuple[int, int]]:
    """[start, end] of every Range read of the file at `path` but its footer's (the file's last FOOTER_PROBE bytes,
    which in these small files hold the end of the last row group too)."""
    size, out = path.stat().st_size, []
    for r in requests:
        if "/resolve/" in r["path"] and r["path"].endswith("/" + path.name) and r.get("range"):
            start, end = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", r["range"]).groups())
            if (start, end) != (max(0, size - FOOTER_PROBE), size - 1):
                out.append((start, end))
    return out


def test_where_keeps_pyarrows_rows_in_order_and_never_fetches_a_ruled_out_row_group(hub_env, hubsim_root):
    """`int_score >= 3` on the test Hub yields exactly the rows pyarrow's filter keeps, in order; every row group
    whose maximum int_score is below 3 has none of its bytes read (the request log, footers aside), every other one
    is read; the
    source's record counts the groups skipped and the rows removed."""
    source, docs = _read(_spec())
    assert [(text, rid) for text, rid, _ in docs] == _pyarrow_rows(hubsim_root, pc.field("int_score") >= 3)
    requests = hub_env.requests()
    skipped = rows = 0
    for path in _files(hubsim_root):
        metadata = pq.read_metadata(path)
        column = metadata.schema.to_arrow_schema().get_field_index("int_score")
        reads = _row_group_reads(requests, path)
        for group in range(metadata.num_row_groups):
            start, end = _group_bytes(metadata, group)
            touched = any(a < end and b >= start for a, b in reads)
            ruled_out = metadata.row_group(group).column(column).statistics.max < 3
            assert touched != ruled_out, (path.name, group, reads)
            skipped += ruled_out
            rows += metadata.row_group(group).num_rows
    assert skipped >= 2  # the fixture's promise: odd row groups are scored low throughout
    filtered = source.describe()["filtered"]
    assert filtered == {"documents": rows - len(docs), "row_groups": skipped}
    assert source.describe()["where"] == WHERE


def test_a_filter_of_two_columns_and_a_string(hub_env, hubsim_root):
    """Comparisons joined by `and`, on numbers and a string column, keep what pyarrow's filter keeps."""
    where = "int_score >= 2 and language_score > 0.88 and dump != 'CC-MAIN-2013-20'"
    _, docs = _read(_spec(where))
    expression = (pc.field("int_score") >= 2) & (pc.field("language_score") > 0.88) & (
        pc.field("dump") != "CC-MAIN-2013-20")
    want = _pyarrow_rows(hubsim_root, expression)
    assert want and [(text, rid) for text, rid, _ in docs] == want


def test_every_position_inside_the_filtered_stream_resumes_exactly(hub_env):
    """Opened at the cursor of any document (the first of a row group after a skipped one included), the source
    yields exactly that document and those that followed it: positions count rows as read, and skipped row groups
    are skipped again."""
    _, docs = _read(_spec())
    ends = [cursor.window.end_at for _, _, cursor in docs]
    boundaries = [k for k in range(1, len(docs)) if ends[k - 1].group != ends[k].group
                  or ends[k - 1].file != ends[k].file]
    assert boundaries
    for k in sorted({*boundaries, *range(0, len(docs) - 1, 23), len(docs) - 1}):
        _, rest = _read(_spec(), at=docs[k][2])
        assert rest == docs[k:], k


def test_a_filtered_hub_stream_resumes_exactly_through_the_loader(hub_env):
    """The loader over a filtered Hub stream resumes byte for byte, also sharded and shuffled across epochs."""
    def make(**kw):
        return resolve_config(env={}, source="hub", dataset=DATASET_REPO, name=SCORED_CONFIG, where=WHERE,
                              tokenizer="byte", seq_len=256, batch_size=2, hub_cache=False, **kw)

    assert_resumes(make, n=40, k=17)
    assert_resumes(lambda **kw: make(shard_mod=2, shard_rem=1, shuffle_seed=5, shuffle_window=20, epochs=2, **kw),
                   n=30, k=13)


def test_the_head_cache_keeps_rows_apart_for_each_set_of_columns(hub_env, hubsim_root):
    """A warm start after an unfiltered run does not take that run's cached rows (they lack int_score) and a warm
    filtered run gives the cold one's documents; a filter on other columns, warm after it, gives its own rows."""
    _, plain = _read(_spec(where=None), hub_cache=True)
    assert len(plain) == sum(pq.read_metadata(p).num_rows for p in _files(hubsim_root))
    cold_source, cold = _read(_spec(), hub_cache=True)
    warm_source, warm = _read(_spec(), hub_cache=True)
    assert warm == cold and warm_source.describe()["head_cache"]["hits"] > 0
    other = "score < 2.5"
    _, docs = _read(_spec(other), hub_cache=True)
    assert [(t, i) for t, i, _ in docs] == _pyarrow_rows(hubsim_root, pc.field("score") < 2.5)


def test_kept_first_batches_are_kept_apart_for_each_filter(hub_env):
    """The first batches a warm start replays are those of its own filter: after an unfiltered run kept its first
    batches, a filtered run with the cache gives the filtered stream's batches (those of a run without the cache,
    which differ from the unfiltered ones: the stream's second row does not pass), and keeps them for the next."""
    def make(**kw):
        return resolve_config(env={}, source="hub", dataset=DATASET_REPO, name=SCORED_CONFIG, tokenizer="byte",
                              seq_len=1024, batch_size=4, **kw)

    def first_batches(config):
        loader = FineWebLoader(config)
        try:
            return [np.array(loader.next_batch()) for _ in range(3)], loader.stats()["source"]["first_batches"]
        finally:
            loader.close()

    plain, _ = first_batches(make())
    filtered, kept = first_batches(make(where=WHERE))
    replayed, again = first_batches(make(where=WHERE))
    fresh, _ = pull(make(where=WHERE, hub_cache=False), 3)
    assert not np.array_equal(plain[0], fresh[0])
    assert kept["replayed"] == 0 and kept["kept"] >= 3 and again["replayed"] >= 3
    assert all(np.array_equal(a, b) and np.array_equal(a, c) for a, b, c in zip(filtered, replayed, fresh))


@pytest.mark.parametrize("where, named", [("int_scor >= 3", "'int_scor'"), ("dump >= 3", "'dump'"),
                                          ("int_score == 'x'", "'int_score'")])
def test_a_column_the_files_lack_or_of_another_type_is_named(hub_env, where, named):
    """A column the parquet files lack, or whose type its literal does not compare with, is a ConfigError naming
    it and the file, found in the first footer."""
    with pytest.raises(ConfigError, match=rf"--where .*{named}.*{SCORED_DIR}/000_00000.parquet"):
        _read(_spec(where))


def test_the_datasets_reader_keeps_the_same_rows(hub, hubsim_root):
    """--hub-reader datasets filters each row: the ids of pyarrow's filter in order, as the native reader's (each
    read in a fresh, sealed process: `datasets` reads HF_ENDPOINT once, at import)."""
    want = [rid for _, rid in _pyarrow_rows(hubsim_root, pc.field("int_score") >= 3)]
    for reader in ("datasets", "native"):
        env = dict(hub.env(hub.new_home()), PYTHONPATH=str(REPO_ROOT))
        proc = subprocess.run([sys.executable, "-m", "tests.hubsim.doc_ids", reader, "1", "0", SCORED_CONFIG, WHERE],
                              capture_output=True, env=env, cwd=REPO_ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        out = orjson.loads(proc.stdout)
        assert out["ids"] == want, reader
        assert out["source"]["filtered"]["documents"] > 0
    assert hub.violations() == []

"""A bootstrap much smaller than one of the Hub's files reads only the row groups it writes (issue 26): from a test
Hub whose files are 100 MB each, `--gb 0.01` fetches at most 3x the bytes it writes, as the server's request log
counts them; and what it wrote is the file's rows, in order."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.loader.files.synthetic import synthetic_record
from tests.bootstrap.support import lines_of, manifest_of
from tests.hubsim.clientenv import client_env
from tests.hubsim.repos import DATA_DIR, DATASET_CARD, DATASET_REPO, ROW_GROUP_ROWS, SCHEMA, shard_name
from tests.hubsim.server import HubServer

FILE_BYTES = 100 * 10**6


@pytest.fixture(scope="module")
def big_files(tmp_path_factory):
    """A test Hub of two ~100 MB parquet files (1,000-row row groups, as FineWeb-Edu's), built from one row group's
    records written again and again (seconds, not minutes); yields the server."""
    root = tmp_path_factory.mktemp("hub100")
    dataset = root / "datasets" / DATASET_REPO
    (dataset / DATA_DIR).mkdir(parents=True)
    (dataset / "README.md").write_text(DATASET_CARD, encoding="utf-8")
    table = pa.Table.from_pylist([synthetic_record(5, i) for i in range(ROW_GROUP_ROWS)], schema=SCHEMA)
    for index in range(2):
        path = dataset / DATA_DIR / shard_name(index)
        with pq.ParquetWriter(path, SCHEMA, compression="snappy") as writer:
            while path.stat().st_size < FILE_BYTES:
                writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
    with HubServer(root) as server:
        yield server


def test_a_target_far_below_one_file_reads_at_most_three_times_what_it_writes(big_files, tmp_path, monkeypatch):
    """--gb 0.01 against 100 MB files: the parquet bytes the server sent (footer and row groups of the first file,
    nothing of the second) are at most 3x the JSONL written, the lines are the file's rows in order, and the manifest
    records each row group read."""
    for key, value in client_env(big_files.url, tmp_path / "home").items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    big_files.new_log()
    result = run_bootstrap(bootstrap_config(out=str(tmp_path / "out"), gb=0.01))
    assert result["complete"] and result["bytes"] >= 0.01 * 10**9
    parquet = [r for r in big_files.flush() if r["method"] == "GET" and r["path"].endswith(".parquet")]
    assert {r["path"].rsplit("/", 1)[-1] for r in parquet} == {shard_name(0)}
    assert sum(r["bytes"] for r in parquet) <= 3 * result["bytes"]
    [entry] = manifest_of(tmp_path / "out")["hub_files"][:1]
    assert [g["group"] for g in entry["row_groups"]] == list(range(len(entry["row_groups"])))
    rows = [orjson.dumps({"text": r["text"], "id": r["id"]}) + b"\n"
            for r in (synthetic_record(5, i) for i in range(ROW_GROUP_ROWS))]
    lines = lines_of(tmp_path / "out")
    assert len(lines) == result["documents"] and lines == [rows[i % ROW_GROUP_ROWS] for i in range(len(lines))]

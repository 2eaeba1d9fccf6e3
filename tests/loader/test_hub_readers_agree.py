"""The native Hub reader yields the documents of the `datasets` reader (the reference), in the same order, so the same
batches, against the test Hub server: cold, warm (from its caches) and reader 1 of 3. Each reading is a fresh sealed
process (`python -m tests.hubsim.doc_ids`), as `datasets` reads HF_ENDPOINT once, at import. The reference is read
once: its own cache cannot change its order, and a reader's share is a stretch of it (sources.deal)."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from tests.helpers import REPO_ROOT
from tests.hubsim.fixtures import HubRun


def read_ids(run: HubRun, home, reader: str, mod: int = 1, rem: int = 0) -> dict:
    env = dict(run.env(home), PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run([sys.executable, "-m", "tests.hubsim.doc_ids", reader, str(mod), str(rem)],
                          capture_output=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return orjson.loads(proc.stdout)


@pytest.fixture(scope="module")
def readings(hubsim_server, tmp_path_factory):
    """The reference (datasets, cold), and the native reader in its own HF_HOME: cold, then warm, then shard 1 of 3
    (warm); with the request logs."""
    run = HubRun(hubsim_server, tmp_path_factory.mktemp("readers"))
    out = {"reference": read_ids(run, run.new_home(), "datasets")}
    home = run.new_home()
    for case, shard in (("cold", (1, 0)), ("warm", (1, 0)), ("shard", (3, 1))):
        run.new_log(f"native-{case}")
        out["native", case] = read_ids(run, home, "native", *shard)
        out["native", case]["requests"] = run.requests()
    out["violations"] = run.violations()
    run.close()
    return out


@pytest.mark.parametrize("case", ["cold", "warm", "shard"])
def test_native_reader_yields_the_datasets_readers_documents(readings, case):
    """Same ids, same order: every row of every file, or for reader 1 of 3 the middle third of them (by bytes)."""
    reference = readings["reference"]["ids"]
    assert len(reference) > 1800
    ids = readings["native", case]["ids"]
    if case == "shard":
        first = reference.index(ids[0])
        assert ids == reference[first:first + len(ids)] and 0 < first < len(reference) - len(ids)
        assert abs(len(ids) - len(reference) / 3) < len(reference) / 10
    else:
        assert ids == reference
    assert readings["violations"] == []


def test_native_reader_reads_only_ranges_and_records_the_commit(readings):
    """The native reader never downloads a whole parquet file (every data request is a Range answered 206) and
    its source block names the commit sha it read and the files of the config; the `datasets` reader's names the
    same commit."""
    cold = readings["native", "cold"]
    parquet = [r for r in cold["requests"] if r["path"].endswith(".parquet")]
    assert parquet and all(r["status"] == 206 and r["range"] for r in parquet)
    source = cold["source"]
    assert source["reader"] == "native" and len(source["revision"]) == 40 and source["files"] == 2
    assert readings["reference"]["source"]["revision"] == source["revision"]


def test_warm_native_start_makes_at_most_one_request_before_reading_past_its_head_cache(readings):
    """Warm, the listing is re-validated with one HEAD (the branch's commit) and the head cache serves the first
    row groups (decoded) and footers from disk: the requests left are that HEAD and the reads past the cache."""
    warm = readings["native", "warm"]
    non_data = [r for r in warm["requests"] if not r["path"].endswith(".parquet")]
    assert [r["method"] for r in non_data] == ["HEAD"]
    assert warm["source"]["head_cache"]["hits"] >= 2

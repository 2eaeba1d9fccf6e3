"""The native Hub reader (huggingface_hub + pyarrow range reads) against the test Hub server, in this process."""

from __future__ import annotations

import hashlib
from collections import Counter

import pyarrow.parquet as pq
import pytest

from fwe_cli.errors import SourceError
from fwe_cli.loader.hub.data_files import match_files, pattern_regex, split_patterns
from fwe_cli.loader.hub.footers import hub_units
from fwe_cli.loader.hub.listing import resolve_listing
from fwe_cli.loader.hub.ranges import FOOTER_PROBE
from fwe_cli.loader.remote.parquet_spans import column_span
from fwe_cli.loader.hub.readahead import HubParquetReader, iter_rows
from fwe_cli.loader.sources.units import Layout
from tests.hubsim.repos import CONFIG_NAME, DATA_DIR, DATASET_REPO

SPLIT = "train"


def _repo_files(hubsim_root) -> list:
    return sorted((hubsim_root / "datasets" / DATASET_REPO / DATA_DIR).glob("*.parquet"))


def _endpoints(hub) -> Counter:
    return Counter((r["method"], r["endpoint"]) for r in hub.requests() if r["endpoint"] != "GET /api/agent-harnesses")


def test_listing_names_the_configs_files_in_sorted_order_with_sizes_and_lfs_hashes(hub_env, hubsim_root):
    """A cold listing holds exactly the config's parquet files, sorted as `datasets` reads them, each with the size
    and sha256 of the bytes the server holds, at the commit sha the branch points at; it costs two requests."""
    listing = resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT)
    files = _repo_files(hubsim_root)
    assert [f.path for f in listing.files] == [f"{DATA_DIR}/{p.name}" for p in files]
    assert [(f.size, f.sha256) for f in listing.files] == [
        (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest()) for p in files]
    assert len(listing.revision) == 40
    assert sum(_endpoints(hub_env).values()) == 2


def test_a_warm_listing_costs_one_head_request_and_none_offline_or_at_a_sha(hub_env, monkeypatch):
    """Once listed, a branch is re-validated with one HEAD; a commit sha or HF_HUB_OFFLINE=1 needs no request."""
    cold = resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT)
    hub_env.new_log("warm")
    assert resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT) == cold
    requests = hub_env.requests()
    assert [(r["method"], r["path"].split("/resolve/")[-1]) for r in requests] == [("HEAD", "main/README.md")]
    hub_env.new_log("by-sha")
    assert resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT, revision=cold.revision) == cold
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT) == cold
    assert hub_env.requests() == []


def test_offline_without_a_cached_listing_says_how_to_get_out(hub_env, monkeypatch):
    """HF_HUB_OFFLINE=1 on an empty cache is a SourceError naming the variable and the other sources."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match=r"HF_HUB_OFFLINE=1 and no cached listing.*--local-path"):
        resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT)


def test_an_unknown_config_or_split_is_named(hub_env):
    """A config or split the card does not list is a SourceError naming what is there."""
    with pytest.raises(SourceError, match=r"no config 'sample-1T'.*configs: sample-10BT"):
        resolve_listing(DATASET_REPO, "sample-1T", SPLIT)
    with pytest.raises(SourceError, match=r"no split 'test'.*splits: train"):
        resolve_listing(DATASET_REPO, CONFIG_NAME, "test")


def whole(listing) -> list:
    """The pieces of every file of a listing, in order: what one reader of the whole stream reads."""
    layout = Layout.of(hub_units(listing, None, None))
    return layout.pieces(0, layout.total)


def test_reader_yields_every_row_in_file_order_reading_only_the_wanted_columns(hub_env, hubsim_root):
    """Row groups come back in file order with the rows pyarrow reads from the files themselves, and every data
    request is a Range read: the footer, then one span per row group holding only `text` and `id`."""
    listing = resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT)
    hub_env.new_log("read")
    got = [row for row, _after, _anchor in iter_rows(HubParquetReader(listing, whole(listing)))]
    want = [row for path in _repo_files(hubsim_root) for row in pq.read_table(path, columns=["text", "id"]).to_pylist()]
    assert got == want
    want_ranges = Counter()
    for path in _repo_files(hubsim_root):
        metadata, size = pq.read_metadata(path), path.stat().st_size
        want_ranges[(path.name, f"bytes={max(0, size - FOOTER_PROBE)}-{size - 1}")] += 1
        for group in range(metadata.num_row_groups):
            start, end = column_span(metadata.row_group(group), ["text", "id"])
            assert end <= metadata.row_group(group).column(2).data_page_offset  # the span holds text and id only
            want_ranges[(path.name, f"bytes={start}-{end - 1}")] += 1
    reads = Counter((r["path"].rsplit("/", 1)[-1], r["range"]) for r in hub_env.requests() if "/resolve/" in r["path"])
    assert reads == want_ranges


def test_closing_the_reader_early_stops_the_read_ahead_thread(hub_env):
    """Leaving the iteration after one row group ends the background thread (no read is waited on afterwards)."""
    listing = resolve_listing(DATASET_REPO, CONFIG_NAME, SPLIT)
    reader = HubParquetReader(listing, whole(listing), read_ahead=1)
    iterator = iter(reader)
    assert len(next(iterator)[2]["text"]) > 0
    iterator.close()
    reader._thread.join(timeout=30)  # a bound, not a wait for time to pass: the thread ends at its next put
    assert not reader._thread.is_alive()


def test_patterns_follow_datasets_glob_rules():
    """`*` stays inside a path segment, `**` spans them, hidden files and folders are skipped, results are sorted."""
    names = ["sample/10BT/b.parquet", "sample/10BT/a.parquet", "sample/10BT/sub/c.parquet", "sample/10BT/.x.parquet",
             "data/__pycache__/d.parquet", "data/e.parquet", "README.md"]
    assert match_files(names, ["sample/10BT/*"]) == ["sample/10BT/a.parquet", "sample/10BT/b.parquet"]
    assert match_files(names, ["sample/**/*.parquet"]) == [
        "sample/10BT/a.parquet", "sample/10BT/b.parquet", "sample/10BT/sub/c.parquet"]
    assert match_files(names, ["data/**"]) == ["data/e.parquet"]
    assert pattern_regex("a?c").match("abc") and not pattern_regex("a?c").match("a/c")


def test_card_data_files_forms():
    """A config's data_files may be a list of {split, path}, or a bare path / list of paths meaning the train split."""
    card = {"configs": [{"config_name": "x", "data_files": [{"split": "train", "path": "d/*"}]},
                        {"config_name": "y", "data_files": "e/*.parquet"},
                        {"config_name": "z", "data_files": ["f/*", "g/*"]}]}
    assert split_patterns(card, "x", "train", "r") == ["d/*"]
    assert split_patterns(card, "y", "train", "r") == ["e/*.parquet"]
    assert split_patterns(card, "z", "train", "r") == ["f/*", "g/*"]

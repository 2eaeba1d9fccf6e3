"""The native Hub reader's parts on their own: range downloads into a sparse file (resumed after a cut, checked,
released), the row-group converter, and the stream's positions, bad records and checks (over small parquet files
served by the test Hub); the node index from a SLURM array."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.hub_convert import convert_group
from fwe_cli.bootstrap.hub_download import Cancelled, Fetcher
from fwe_cli.bootstrap.hub_stream import HubFileStream
from fwe_cli.errors import ConfigError, OutputError, SourceError
from fwe_cli.loader.config import Shard
from fwe_cli.loader.hub.listing import HubFile, HubListing
from tests.bootstrap.support import core_run
from tests.helpers import invoke
from tests.hubsim.repos import DATASET_REPO
from tests.hubsim.server import HubServer

SHARD0 = "sample/10BT/000_00000.parquet"


def shard0(hub, root: Path) -> tuple[str, HubFile, bytes]:
    data = (root / "datasets" / DATASET_REPO / SHARD0).read_bytes()
    url = f"{hub.url}/datasets/{DATASET_REPO}/resolve/main/{SHARD0}"
    return url, HubFile(SHARD0, len(data), hashlib.sha256(data).hexdigest()), data


def test_spans_land_at_their_offsets_and_the_whole_file_hashes_as_it_lands(hub, hubsim_root, tmp_path):
    """Three spans of one file, fetched on two connections, land byte for byte at their offsets (one ranged GET
    each); the file's sha256, hashed as bytes land, is the listing's; a released download's file is gone."""
    url, file, data = shard0(hub, hubsim_root)
    fetcher = Fetcher(str(tmp_path / "dl"), connections=2)
    try:
        download = fetcher.file(url, file)
        third = file.size // 3
        download.add_spans([(0, third), (third, 2 * third), (2 * third, file.size)])
        download.start_hashing()
        download.wait(0, file.size)
        assert Path(download.path).read_bytes() == data
        assert download.sha256() == file.sha256
        assert sorted(r["range"] for r in hub.requests()) == sorted(
            [f"bytes=0-{third - 1}", f"bytes={third}-{2 * third - 1}", f"bytes={2 * third}-{file.size - 1}"])
        fetcher.release(download)
        assert not os.path.exists(download.path)
        with pytest.raises(Cancelled):
            download.wait(0, 1)
    finally:
        fetcher.close()


def test_a_cut_span_goes_on_from_the_bytes_received(hub, hubsim_root, tmp_path):
    """A span whose answer is cut after 100 kB is asked again for the rest only, and the bytes are whole."""
    url, file, data = shard0(hub, hubsim_root)
    hub.set_faults(drop_after_bytes=100_000, drop_count=1, drop_match="parquet")
    fetcher = Fetcher(str(tmp_path / "dl"), connections=1)
    try:
        download = fetcher.file(url, file)
        download.add_spans([(1000, 300_000)])
        download.wait(1000, 300_000)
        assert Path(download.path).read_bytes()[1000:300_000] == data[1000:300_000]
        assert [r["range"] for r in hub.requests()] == ["bytes=1000-299999", "bytes=101000-299999"]
    finally:
        fetcher.close()


def test_a_span_the_hub_keeps_refusing_fails_its_waiter_naming_the_url(hub, hubsim_root, tmp_path, monkeypatch):
    """A span answered 404 (not retried) makes `wait` raise a one-line SourceError naming the URL and bytes."""
    url, file, _ = shard0(hub, hubsim_root)
    fetcher = Fetcher(str(tmp_path / "dl"), connections=1)
    try:
        download = fetcher.file(url.replace("000_00000", "999_00000"), file)
        download.add_spans([(0, 10)])
        with pytest.raises(SourceError, match=r"cannot download .*999_00000\.parquet \(bytes 0-9\)") as caught:
            download.wait(0, 10)
        assert "\n" not in str(caught.value)
    finally:
        fetcher.close()


@pytest.fixture()
def messy_files(tmp_path) -> list[Path]:
    """Two parquet files (text, id; 3 row groups of 4 rows each) with null texts at file rows 2, 5 and 12."""
    paths = []
    for f in range(2):
        texts = [None if (f, i) in {(0, 1), (0, 4), (1, 11)} else f"doc {f}-{i}" for i in range(12)]
        table = pa.table({"text": texts, "id": [f"id{f}-{i}" if i % 5 else None for i in range(12)]})
        paths.append(tmp_path / f"{f}.parquet")
        pq.write_table(table, paths[-1], row_group_size=4)
    return paths


def test_convert_group_writes_what_the_datasets_reader_writes(messy_files):
    """A row group becomes one compact orjson line per string text ({"text", "id"}, no id key for a null id), the
    null texts are reported by row, and start_row skips rows; as a list of lines, the same bytes."""
    jsonl, bad, rows = convert_group(str(messy_files[0]), 0, 0, "text")
    assert rows == 4 and bad == [(1, "'text' is null")]
    assert jsonl.splitlines() == [b'{"text":"doc 0-0"}', b'{"text":"doc 0-2","id":"id0-2"}',
                                  b'{"text":"doc 0-3","id":"id0-3"}']
    assert convert_group(str(messy_files[0]), 0, 2, "text")[0] == b"".join(jsonl.splitlines(keepends=True)[1:])
    assert convert_group(str(messy_files[0]), 0, 0, "text", joined=False)[0] == jsonl.splitlines(keepends=True)


@pytest.fixture()
def messy_hub(messy_files, tmp_path, monkeypatch):
    """The messy files as the dataset x/y of a test Hub this process talks to; yields (server, listing)."""
    repo = tmp_path / "root" / "datasets" / "x" / "y"
    repo.mkdir(parents=True)
    files = []
    for path in messy_files:
        data = path.read_bytes()
        (repo / path.name).write_bytes(data)
        files.append(HubFile(path.name, len(data), hashlib.sha256(data).hexdigest()))
    with HubServer(tmp_path / "root") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server, HubListing("x/y", None, "train", "main", tuple(files))


def messy_stream(messy_hub, tmp_path, **kwargs) -> HubFileStream:
    return HubFileStream(messy_hub[1], Shard(), str(tmp_path / "dl"), "text", False, workers=0, **kwargs)


def test_stream_positions_resume_exactly_and_count_bad_rows_once(messy_hub, tmp_path):
    """Stopping after any line and starting a new stream at position() gives exactly the remaining lines, and the
    bad records (named file:row) add up to the uninterrupted count, none counted twice."""
    whole = messy_stream(messy_hub, tmp_path)
    lines = [line for _, line in whole]
    whole.close()
    assert len(lines) == 21 and whole.bad.count == 3
    assert whole.bad.examples[0] == "x/y/0.parquet:row2: 'text' is null"
    for cut in (1, 3, 10, 12, 20):
        first = messy_stream(messy_hub, tmp_path)
        head = [pair[1] for _, pair in zip(range(cut), first)]
        first.close()
        rest = messy_stream(messy_hub, tmp_path, start=first.position(), bad=first.bad)
        assert head + [line for _, line in rest] == lines, cut
        rest.close()
        assert rest.bad.count == 3, cut


def test_strict_stream_stops_at_the_first_bad_row(messy_hub, tmp_path):
    """--bad-records error: the lines before the first null text come out, then a SourceError naming file and row."""
    stream = messy_stream(messy_hub, tmp_path)
    stream.strict = True
    got = []
    with pytest.raises(SourceError, match=r"0\.parquet:row2: 'text' is null"):
        for _, line in stream:
            got.append(line)
    stream.close()
    assert len(got) == 1


def test_a_small_target_reads_only_its_row_groups_and_records_them(messy_hub, tmp_path):
    """A target inside the first file fetches its footer and only the row groups it needs (each span once), not
    the second file; the file's manifest entry records each row group read with its offset, length and sha256."""
    server, listing = messy_hub
    stream = messy_stream(messy_hub, tmp_path, remaining=40)
    got = [line for _, (_, line) in zip(range(2), stream)]
    stream.close()
    assert got == [b'{"text":"doc 0-0"}\n', b'{"text":"doc 0-2","id":"id0-2"}\n']
    assert all(r["path"].endswith("/0.parquet") for r in server.flush())
    [entry] = [e for e in stream.manifest_fields()["hub_files"] if "row_groups" in e]
    data = (tmp_path / "root" / "datasets" / "x" / "y" / "0.parquet").read_bytes()
    for record in entry["row_groups"]:
        piece = data[record["offset"]:record["offset"] + record["bytes"]]
        assert hashlib.sha256(piece).hexdigest() == record["sha256"]
    assert [r["group"] for r in entry["row_groups"]] == [0]


def test_a_download_that_differs_from_the_listing_stops_the_run_and_refuses_a_resume(messy_hub, tmp_path):
    """A whole file whose sha256 differs from the listing's ends the stream with a SourceError naming it, and the
    next run over that download folder is refused (its lines cannot be trusted) until --force clears it."""
    server, listing = messy_hub
    wrong = HubListing("x/y", None, "train", "main", (listing.files[0]._replace(sha256="0" * 64)
                                                      if hasattr(listing.files[0], "_replace") else
                                                      HubFile(listing.files[0].path, listing.files[0].size, "0" * 64),
                                                      listing.files[1]))
    stream = HubFileStream(wrong, Shard(), str(tmp_path / "dl"), "text", False, workers=0)
    with pytest.raises(SourceError, match=r"^0\.parquet: sha256 \w+ of the download differs from the Hub listing's"):
        for _ in stream:
            pass
    stream.close()
    assert [p.name for p in (tmp_path / "dl").iterdir()] == ["0.parquet.sha256-mismatch"]


def test_slurm_array_variables_give_the_shard_unless_flags_do():
    """SLURM_ARRAY_TASK_COUNT/ID(-MIN) set the shard when no --shard-* flag is given; flags win; out-of-range or
    non-numeric values are a ConfigError naming the variables; outside SLURM the default is one node."""
    env = {"SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_ID": "3"}
    config = bootstrap_config(out="o", gb=1, env=env)
    assert (config.shard, config.shard_origin) == (Shard(4, 3), "slurm")
    flagged = bootstrap_config(out="o", gb=1, shard_mod=2, shard_rem=0, env=env)
    assert (flagged.shard, flagged.shard_origin) == (Shard(2, 0), "flags")
    assert bootstrap_config(out="o", gb=1, env={}).shard == Shard()
    with pytest.raises(ConfigError, match="SLURM_ARRAY_TASK_ID=9"):
        bootstrap_config(out="o", gb=1, env={"SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_ID": "9"})
    with pytest.raises(ConfigError, match="not integers"):
        bootstrap_config(out="o", gb=1, env={"SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_ID": "x"})


def test_help_says_how_hub_nodes_split(monkeypatch):
    """`fwe bootstrap --help` says the Hub source splits nodes by file, the others by document, and names the
    SLURM variables and the --hub-reader choice."""
    monkeypatch.setenv("COLUMNS", "200")
    text = " ".join(invoke("bootstrap", "--help").stdout.split())
    for phrase in ("the Hub source by FILE", "by DOCUMENT", "SLURM_ARRAY_TASK_COUNT", "--hub-reader", "byte-identical"):
        assert phrase in text, phrase


def test_a_datasets_reader_bootstrap_is_not_resumed_by_the_native_reader(tmp_path, monkeypatch):
    """An interrupted bootstrap made by the `datasets` reader (or by a version before the native reader) is resumed
    only with --hub-reader datasets: the native reader refuses it, naming the flag."""
    from datasets import Dataset

    monkeypatch.setattr("fwe_cli.loader.hub.streaming.open_hub_stream",
                        lambda *a, **k: Dataset.from_dict({"text": [f"d{i} " * 50 for i in range(500)]})
                        .to_iterable_dataset())
    monkeypatch.setattr("fwe_cli.loader.hub.streaming.hub_revision", lambda dataset, revision=None: "a" * 40)
    flags = dict(gb=1, file_mb=0.01, dataset="test/in-memory")
    from fwe_cli.bootstrap.run import run_bootstrap

    calls = iter(range(10**6))
    stopped = run_bootstrap(bootstrap_config(out=str(tmp_path / "o"), hub_reader="datasets", **flags),
                            should_stop=lambda: next(calls) >= 2)
    assert stopped["outcome"] == "interrupted"
    with pytest.raises(OutputError, match="--hub-reader 'datasets' there, 'native' now"):
        core_run(tmp_path / "o", **flags)
    assert os.path.exists(tmp_path / "o" / "manifest.json")


def test_workers_leave_ctrl_c_and_sigterm_to_the_parent():
    """Conversion workers ignore SIGINT and SIGTERM (a terminal's Ctrl-C or SLURM's SIGTERM reaches the whole
    process group): the parent alone stops, at a checkpoint, and then shuts them down."""
    import multiprocessing
    import signal
    from concurrent.futures import ProcessPoolExecutor

    from fwe_cli.bootstrap.hub_convert import watch_parent

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=watch_parent,
                             initargs=(os.getpid(),)) as pool:
        handlers = [pool.submit(signal.getsignal, sig).result() for sig in (signal.SIGINT, signal.SIGTERM)]
    assert handlers == [signal.SIG_IGN, signal.SIG_IGN]

"""The native Hub reader's parts on their own: the resumable, verified download of one file; the row-group
converter and the stream's positions and bad records (over local files); the node index from a SLURM array."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fwe_cli.bootstrap import hub_stream
from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.hub_convert import convert_group
from fwe_cli.bootstrap.hub_download import download_file
from fwe_cli.bootstrap.hub_stream import HubFileStream
from fwe_cli.errors import ConfigError, OutputError, SourceError
from fwe_cli.loader.config import Shard
from fwe_cli.loader.sources.hub_listing import HubFile, HubListing
from tests.bootstrap.support import core_run
from tests.helpers import invoke
from tests.hubsim.repos import DATASET_REPO

SHARD0 = "sample/10BT/000_00000.parquet"


def shard0(hub, root: Path) -> tuple[str, HubFile, bytes]:
    data = (root / "datasets" / DATASET_REPO / SHARD0).read_bytes()
    url = f"{hub.url}/datasets/{DATASET_REPO}/resolve/main/{SHARD0}"
    return url, HubFile(SHARD0, len(data), hashlib.sha256(data).hexdigest()), data


def test_download_resumes_a_part_file_with_a_range_request(hub, hubsim_root, tmp_path):
    """A .part holding the first 12,345 bytes is continued with `Range: bytes=12345-`, verified and renamed."""
    url, file, data = shard0(hub, hubsim_root)
    dest = tmp_path / "f.parquet"
    Path(str(dest) + ".part").write_bytes(data[:12_345])
    assert download_file(url, file, str(dest)) == str(dest)
    assert dest.read_bytes() == data and not Path(str(dest) + ".part").exists()
    assert [r["range"] for r in hub.requests()] == ["bytes=12345-"]


def test_sha256_mismatch_downloads_once_more_then_fails_naming_the_file(hub, hubsim_root, tmp_path):
    """A download whose sha256 differs from the listing's is deleted and fetched again once; a second mismatch is
    a one-line SourceError naming the file, and nothing is left under the destination name."""
    url, file, _ = shard0(hub, hubsim_root)
    wrong = HubFile(file.path, file.size, "0" * 64)
    dest = tmp_path / "f.parquet"
    with pytest.raises(SourceError, match=f"^{SHARD0}: sha256 .* differs from the Hub listing's 0000") as caught:
        download_file(url, wrong, str(dest))
    assert "\n" not in str(caught.value)
    assert [r["range"] for r in hub.requests()] == ["bytes=0-", "bytes=0-"]
    assert not dest.exists() and not Path(str(dest) + ".part").exists()


def test_a_complete_file_from_an_earlier_run_is_rehashed_before_it_is_trusted(hub, hubsim_root, tmp_path):
    """A file already under its final name is used without a request when it hashes right, and downloaded again
    when its bytes changed (a disk that lost data)."""
    url, file, data = shard0(hub, hubsim_root)
    dest = tmp_path / "f.parquet"
    dest.write_bytes(data)
    download_file(url, file, str(dest))
    assert hub.requests() == []
    dest.write_bytes(b"x" * len(data))
    download_file(url, file, str(dest))
    assert dest.read_bytes() == data and len(hub.requests()) == 1


def test_close_stops_a_download_and_keeps_its_part(hub, hubsim_root, tmp_path):
    """A download cancelled (stop event set) raises without renaming; its .part stays for a resume."""
    from fwe_cli.bootstrap.hub_download import Cancelled

    url, file, _ = shard0(hub, hubsim_root)
    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        download_file(url, file, str(tmp_path / "f.parquet"), stop)
    assert not (tmp_path / "f.parquet").exists() and (tmp_path / "f.parquet.part").exists()


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
    null texts are reported by row, and start_row skips rows."""
    jsonl, bad, rows = convert_group(str(messy_files[0]), 0, 0, "text")
    assert rows == 4 and bad == [(1, "'text' is null")]
    assert jsonl.splitlines() == [b'{"text":"doc 0-0"}', b'{"text":"doc 0-2","id":"id0-2"}',
                                  b'{"text":"doc 0-3","id":"id0-3"}']
    assert convert_group(str(messy_files[0]), 0, 2, "text")[0] == b"".join(jsonl.splitlines(keepends=True)[1:])


class LocalFiles:
    """Stands in for Downloads: the 'downloads' are local files already there."""

    def __init__(self, repo, revision, files, directory, ahead, first=0, wanted=None):
        self.files = files

    def done(self, index):
        return True

    def wait(self, index):
        return self.files[index].path

    def release(self, index):
        pass

    def close(self):
        pass


def messy_stream(paths, monkeypatch, **kwargs) -> HubFileStream:
    monkeypatch.setattr(hub_stream, "Downloads", LocalFiles)
    listing = HubListing("x/y", None, "train", "f" * 40, tuple(HubFile(str(p), 1, None) for p in paths))
    return HubFileStream(listing, Shard(), "unused", "text", False, workers=0, **kwargs)


def test_stream_positions_resume_exactly_and_count_bad_rows_once(messy_files, monkeypatch):
    """Stopping after any line and starting a new stream at position() gives exactly the remaining lines, and the
    bad records (named file:row) add up to the uninterrupted count, none counted twice."""
    whole = messy_stream(messy_files, monkeypatch)
    lines = [line for _, line in whole]
    assert len(lines) == 21 and whole.bad.count == 3
    assert whole.bad.examples[0] == f"x/y/{messy_files[0]}:row2: 'text' is null"
    for cut in (1, 3, 10, 12, 20):
        first = messy_stream(messy_files, monkeypatch)
        head = [pair[1] for _, pair in zip(range(cut), first)]
        rest = messy_stream(messy_files, monkeypatch, start=first.position(), bad=first.bad)
        assert head + [line for _, line in rest] == lines, cut
        assert rest.bad.count == 3, cut


def test_strict_stream_stops_at_the_first_bad_row(messy_files, monkeypatch):
    """--bad-records error: the lines before the first null text come out, then a SourceError naming file and row."""
    stream = messy_stream(messy_files, monkeypatch)
    stream.strict = True
    got = []
    with pytest.raises(SourceError, match=r"0\.parquet:row2: 'text' is null"):
        for _, line in stream:
            got.append(line)
    assert len(got) == 1


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

    monkeypatch.setattr("fwe_cli.loader.sources.hub_datasets.open_hub_stream",
                        lambda *a, **k: Dataset.from_dict({"text": [f"d{i} " * 50 for i in range(500)]})
                        .to_iterable_dataset())
    monkeypatch.setattr("fwe_cli.loader.sources.hub_datasets.hub_revision", lambda dataset: "a" * 40)
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

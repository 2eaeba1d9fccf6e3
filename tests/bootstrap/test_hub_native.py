"""`fwe bootstrap` from the test Hub with the native reader, against the `datasets` reader's output: cold, after a
kill -9, split by file over nodes (flags or a SLURM array), with a target that needs only some files.

The test Hub here has 3 parquet files of 100-row row groups (several groups per file). The `datasets` reader runs
in a subprocess (huggingface_hub reads HF_ENDPOINT at import); the native reader reads the endpoint when used, so
it runs in this process, except where it must be killed."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.loader.files.bootstrap_format import Layout
from fwe_cli.loader.hub.ranges import FOOTER_PROBE
from tests.bootstrap.support import cli, file_hashes, leftovers, lines_of, manifest_of
from tests.helpers import run_fwe
from tests.hubsim.clientenv import client_env
from tests.hubsim.faults import Faults
from tests.hubsim.repos import DATASET_REPO, BuildSpec, build_repos
from tests.hubsim.server import HubServer

FLAGS = ("--gb", "1", "--file-mb", "0.3", "--checkpoint-mb", "0.1")  # every row, in several parts


@pytest.fixture(scope="module")
def hub3(tmp_path_factory):
    """A test Hub of 3 files x several 100-row row groups; yields (server, root, rows per file)."""
    root = tmp_path_factory.mktemp("hub3")
    manifest = build_repos(root, BuildSpec(mb=1.2, shards=3, row_group_rows=100))
    with HubServer(root) as server:
        yield server, root, [shard["rows"] for shard in manifest["shards"]]


@pytest.fixture(scope="module")
def references(hub3, tmp_path_factory) -> dict[str, Path]:
    """The bootstraps the `datasets` reader makes of the whole dataset with --fields text and --fields all, each a
    sealed subprocess with a cold cache; the two run side by side."""
    server, _, _ = hub3
    outs, procs = {}, {}

    def bootstrap(fields: str, tmp: Path) -> None:
        env = client_env(server.url, tmp / "home-ref", tmp / "violations.jsonl")
        procs[fields] = run_fwe("bootstrap", *FLAGS, "--fields", fields, "--hub-reader", "datasets", "--out",
                                str(outs[fields]), "--artifacts-dir", str(tmp / "artifacts"), env=env, timeout=300)

    threads = []
    for fields in ("text", "all"):
        tmp = tmp_path_factory.mktemp(f"ref-{fields}")
        outs[fields] = tmp / "reference"
        threads.append(threading.Thread(target=bootstrap, args=(fields, tmp), name=f"reference-{fields}"))
        threads[-1].start()
    for thread in threads:
        thread.join()
    assert sorted(procs) == ["all", "text"]
    for proc in procs.values():
        assert proc.returncode == 0, proc.stderr
    return outs


@pytest.fixture(scope="module")
def reference(references) -> Path:
    return references["text"]


@pytest.fixture()
def native_env(hub3, tmp_path, monkeypatch):
    """This process talks to the module's test Hub, with an empty Hugging Face cache."""
    for key, value in client_env(hub3[0].url, tmp_path / "home").items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    hub3[0].new_log(tmp_path / "requests.jsonl")
    return hub3[0]


def native(out: Path, **flags) -> dict:
    return run_bootstrap(bootstrap_config(out=str(out), gb=1, file_mb=0.3, checkpoint_mb=0.1, **flags))


def parquet_gets(server) -> Counter:
    """GETs of parquet files by file name (each footer, range and retry counts)."""
    return Counter(r["path"].rsplit("/", 1)[-1] for r in server.flush()
                   if r["method"] == "GET" and r["path"].endswith(".parquet"))


def parquet_bytes(server) -> Counter:
    """Body bytes the server sent for each parquet file."""
    fetched: Counter = Counter()
    for r in server.flush():
        if r["method"] == "GET" and r["path"].endswith(".parquet"):
            fetched[r["path"].rsplit("/", 1)[-1]] += r["bytes"]
    return fetched


def fetched_once(server, root: Path) -> bool:
    """Whether every parquet file was fetched exactly once, byte for byte, besides its footer (read first)."""
    sizes = {p.name: p.stat().st_size for p in (root / "datasets" / DATASET_REPO / "sample" / "10BT").iterdir()}
    return all(sizes[name] <= got <= sizes[name] + FOOTER_PROBE for name, got in parquet_bytes(server).items())


def test_cold_native_bootstrap_is_byte_identical_to_the_datasets_reader(hub3, reference, native_env, tmp_path):
    """The native reader (conversion on 2 worker processes) writes the same part files, byte for byte, as the
    `datasets` reader; its manifest names the revision and the 3 files with their sha256; each file is downloaded
    once and no download is left behind."""
    result = native(tmp_path / "out", workers=2)
    assert result["complete"] and result["source_exhausted"]
    assert file_hashes(tmp_path / "out") == file_hashes(reference)
    assert manifest_of(tmp_path / "out")["files"] == manifest_of(reference)["files"]
    manifest = manifest_of(tmp_path / "out")
    assert manifest["revision"] == manifest_of(reference)["revision"] and len(manifest["revision"]) == 40
    assert [f["path"] for f in manifest["hub_files"]] == [f"sample/10BT/00{i}_00000.parquet" for i in range(3)]
    assert all(len(f["sha256"]) == 64 for f in manifest["hub_files"]) and manifest["hub_reader"] == "native"
    assert sorted(parquet_gets(native_env)) == [f"00{i}_00000.parquet" for i in range(3)]
    assert fetched_once(native_env, hub3[1])
    assert not Path(Layout.for_out(str(tmp_path / "out")).download_dir).exists() and leftovers(tmp_path / "out") == []


def test_fields_all_is_byte_identical_too(references, native_env, tmp_path):
    """With --fields all (every column) the native reader, converting in this process (--workers 0), matches the
    `datasets` reader byte for byte."""
    native(tmp_path / "out", workers=0, fields="all")
    assert file_hashes(tmp_path / "out") == file_hashes(references["all"])


@pytest.mark.parametrize("point", ["record:900", "part-renamed:2"])
def test_resume_after_kill_9_ends_byte_identical(hub3, reference, native_env, tmp_path, point):
    """A native bootstrap killed by SIGKILL (mid-part, or between a part's rename and the manifest) and then
    re-run continues from its checkpoint and ends byte-identical to the `datasets` reader's output."""
    out = tmp_path / "out"
    env = client_env(native_env.url, tmp_path / "home-killed")
    killed = run_fwe("bootstrap", *FLAGS, "--out", str(out), "--artifacts-dir", str(tmp_path / "a"),
                     env=dict(env, FWE_TEST_CRASH_AT=point), timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert manifest_of(out)["complete"] is False
    resumed = native(out, workers=1)
    assert resumed["complete"] and resumed["resumed_from_bytes"] > 0
    assert file_hashes(out) == file_hashes(reference) and leftovers(out) == []


def rows_of_file(reference: Path, rows: list[int], index: int) -> list[bytes]:
    everything = lines_of(reference)
    return everything[sum(rows[:index]):sum(rows[:index + 1])]


def test_nodes_split_by_file(hub3, reference, native_env, tmp_path):
    """--shard-mod 2 --shard-rem 1 downloads only file 1 and holds exactly its rows as the `datasets` reader wrote
    them; node 0 holds files 0 and 2; the manifest says which files and that the split is by file."""
    _, _, rows = hub3
    native(tmp_path / "n1", shard_mod=2, shard_rem=1)
    assert sorted(parquet_gets(native_env)) == ["001_00000.parquet"] and fetched_once(native_env, hub3[1])
    assert lines_of(tmp_path / "n1") == rows_of_file(reference, rows, 1)
    manifest = manifest_of(tmp_path / "n1")
    assert manifest["shard"] == {"mod": 2, "rem": 1, "by": "file", "from": "flags"}
    assert [(f["index"], f["path"]) for f in manifest["hub_files"]] == [(1, "sample/10BT/001_00000.parquet")]
    native(tmp_path / "n0", shard_mod=2, shard_rem=0)
    assert lines_of(tmp_path / "n0") == rows_of_file(reference, rows, 0) + rows_of_file(reference, rows, 2)


def test_slurm_array_picks_the_node_and_flags_win(hub3, reference, native_env, tmp_path):
    """In a SLURM array (task 5 of 3 tasks numbered 4..6) `fwe bootstrap` is node 1 of 3 without flags and says so
    in the manifest; --shard-mod/--shard-rem given on the command line win over the environment."""
    _, _, rows = hub3
    slurm = {"SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4"}
    result = cli(*FLAGS, "--out", str(tmp_path / "slurm"), tmp=tmp_path, env=slurm)
    assert result.exit_code == 0, result.stderr
    assert manifest_of(tmp_path / "slurm")["shard"] == {"mod": 3, "rem": 1, "by": "file", "from": "slurm"}
    assert lines_of(tmp_path / "slurm") == rows_of_file(reference, rows, 1)
    flags = cli(*FLAGS, "--shard-mod", "3", "--shard-rem", "2", "--out", str(tmp_path / "flags"), tmp=tmp_path,
                env=slurm)
    assert flags.exit_code == 0, flags.stderr
    assert manifest_of(tmp_path / "flags")["shard"]["from"] == "flags"
    assert lines_of(tmp_path / "flags") == rows_of_file(reference, rows, 2)


def test_a_small_target_does_not_download_files_it_cannot_need(hub3, reference, native_env, tmp_path):
    """With --gb 0.0005 (well inside file 0) and two downloads allowed at once, file 2 is never requested, and the
    output is the start of the `datasets` reader's output."""
    result = run_bootstrap(bootstrap_config(out=str(tmp_path / "small"), gb=0.0005, downloads=2, workers=1))
    assert result["complete"] and not result["source_exhausted"]
    assert "002_00000.parquet" not in parquet_gets(native_env)
    got = lines_of(tmp_path / "small")
    assert got == lines_of(reference)[:len(got)]


def test_a_cut_download_resumes_from_the_bytes_received(hub3, reference, native_env, tmp_path):
    """When the server cuts a range download after 100 kB, the next request for it asks for the rest only
    (Range: bytes=A+100000-B) and the output is still byte-identical."""
    native_env.set_faults(Faults(drop_after_bytes=100_000, drop_count=1, drop_match=r"000_00000\.parquet"))
    try:
        native(tmp_path / "out", workers=1)
    finally:
        native_env.set_faults(Faults())
    records = [r for r in native_env.flush() if r["path"].endswith("000_00000.parquet")]
    cut = [r["range"] for r in records if r["fault"] == "drop"]
    assert len(cut) == 1
    first, last = cut[0].removeprefix("bytes=").split("-")
    assert f"bytes={int(first) + 100_000}-{last}" in [r["range"] for r in records]
    assert file_hashes(tmp_path / "out") == file_hashes(reference)


def test_single_file_output_holds_the_same_lines(hub3, reference, native_env, tmp_path):
    """--out X.jsonl with the native reader writes the reference's lines into one file, and its download folder
    (X.jsonl.hub-download beside it) is gone when complete."""
    out = tmp_path / "one.jsonl"
    result = run_bootstrap(bootstrap_config(out=str(out), gb=1, workers=1))
    assert result["complete"] and lines_of(out) == lines_of(reference)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("one")) == [
        "one.jsonl", "one.jsonl.manifest.json"]


def test_a_hub_redirecting_to_signed_cdn_urls_is_resolved_once_per_file(hub3, reference, native_env, tmp_path):
    """The Hub redirecting its parquet resolves to signed URLs on a CDN (another server): the download's parallel
    range requests (footer, then the files in pieces over 8 connections) send the resolver one request per file
    and read every byte from the CDN, as the result's `hub_requests` counts too; the output is byte-identical."""
    server, root, _ = hub3
    with HubServer(root) as cdn:
        native_env.set_faults(Faults(redirect_match=r"resolve/.*\.parquet", redirect_to=cdn.url, sign_ttl_s=3600))
        try:
            result = native(tmp_path / "out", workers=1)
        finally:
            native_env.set_faults(Faults())
        reads = cdn.flush()
    assert result["complete"] and file_hashes(tmp_path / "out") == file_hashes(reference)
    resolves = Counter(r["path"].rsplit("/", 1)[-1] for r in native_env.flush() if r["kind"] == "resolve")
    assert resolves == Counter({f"00{i}_00000.parquet": 1 for i in range(3)})
    assert reads and all(r["kind"] == "cdn" and r["status"] == 206 for r in reads)
    assert (result["hub_requests"]["resolver"], result["hub_requests"]["cdn"]) == (3, len(reads))

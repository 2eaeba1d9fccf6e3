"""A bootstrap of the Hub continued from the Hub (`--local-path DIR --tail hub`, compose.head_tail): the Hub's own
stream, the documents the bootstrap holds read from its parts; one cursor over both; the Hub unreachable at the
boundary; and `--grow`, which appends the tail read to the bootstrap (compose.growth).

The test Hub here has 3 parquet files of 3 row groups of 100 rows (~2.4 KB documents); the bootstrap holds 0.2 MB,
which stops inside the first row group of the first file, in parts of 0.05 MB. The native reader reads the endpoint
when used, so the loaders run in this process; a fresh process only where the invariant is about one (a resume,
kill -9)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import pytest

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.errors import SourceError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.bootstrap_format import verify_bootstrap
from fwe_cli.loader.sources.units import permutation
from tests.helpers import fwe_env, invoke, run_fwe
from tests.hubsim.clientenv import client_env
from tests.hubsim.fixtures import HubRun
from tests.hubsim.repos import BuildSpec, build_repos
from tests.hubsim.server import HubServer

SHAPE = {"tokenizer": "byte", "seq_len": 512, "batch_size": 4}
SHAPE_FLAGS = ("--tokenizer", "byte", "--seq-len", "512", "--batch", "4")
HEAD_GB = 0.0002
PART_MB = 0.05


@pytest.fixture(scope="module")
def hub3(tmp_path_factory):
    """The test Hub of 3 files x 3 row groups of 100 rows."""
    root = tmp_path_factory.mktemp("hub3")
    build_repos(root, BuildSpec(mb=1.2, shards=3, row_group_rows=100))
    with HubServer(root) as server:
        yield server


def _point_at(monkeypatch, url: str, home: Path) -> None:
    for name, value in {"HF_ENDPOINT": url, "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
                        "HF_HUB_OFFLINE": "0"}.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def head(hub3, tmp_path_factory) -> Path:
    """A 0.2 MB bootstrap of the test Hub (native reader): it stops inside the first file."""
    out = tmp_path_factory.mktemp("head") / "boot"
    with pytest.MonkeyPatch.context() as monkeypatch:
        _point_at(monkeypatch, hub3.url, tmp_path_factory.mktemp("home"))
        result = run_bootstrap(bootstrap_config(out=str(out), gb=HEAD_GB, source="hub", workers=0, file_mb=PART_MB))
    assert result["outcome"] == "target reached"
    return out


@pytest.fixture
def hub(hub3, tmp_path, monkeypatch) -> HubRun:
    """This process's Hub clients on the module's server, a cold cache, a fresh request log."""
    run = HubRun(hub3, tmp_path / "hub")
    _point_at(monkeypatch, hub3.url, run.new_home())
    yield run
    run.close()


def dead_endpoint() -> str:
    """An endpoint on 127.0.0.1 that refuses connections (a port bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def manifest_of(out: Path) -> dict:
    return orjson.loads((out / "manifest.json").read_bytes())


def own_copy(head: Path, tmp_path: Path) -> Path:
    """A bootstrap of this test's own (growing one or saving states over it changes or pins it)."""
    out = tmp_path / "boot"
    shutil.copytree(head, out)
    return out


def pull(n: int | None = None, tail_after_head: int | None = None, **settings) -> tuple[list[np.ndarray], dict]:
    """`n` batches (or, for a source of two parts, batches until `tail_after_head` tail batches came after the last
    head batch) and the loader's stats."""
    batches: list[np.ndarray] = []
    with FineWebLoader(resolve_config(env={}, **SHAPE, **settings)) as loader:
        for batch in loader:
            batches.append(batch.copy())
            if tail_after_head is not None:
                parts = loader.pipeline.documents.opened.figures().get("parts") or {}
                last_head = parts.get("head_batches")  # the head's batches come first: steps 1..head_batches
                if last_head and len(batches) - last_head >= tail_after_head:
                    break
            elif len(batches) == n:
                break
        return batches, loader.stats()


def test_the_bootstrap_records_where_in_the_hub_stream_it_stopped(head):
    """A Hub bootstrap's manifest holds the listing it read at its revision, where its files' lines begin, and the
    first document it did not write (file, row group, row); the parts hold exactly the documents before it."""
    manifest = manifest_of(head)
    assert len(manifest["hub_listing"]) == 3 and manifest["revision"]
    assert manifest["hub_files"][0]["first"] == {"part": 0, "offset": 0, "line": 0}
    assert all("first" not in f for f in manifest["hub_files"][1:])
    stop = manifest["hub_next"]
    assert (stop["file"], stop["group"]) == (0, 0) and 0 < stop["row"] < 100
    assert stop["index"] == manifest["totals"]["documents"] == stop["row"]
    assert manifest["next"] == {"index": stop["row"], "file": 0, "group": 0, "row": stop["row"]}
    assert len(manifest["files"]) > 1


def _shuffle_seed() -> int:
    """A seed whose first epoch reads a file the bootstrap does not hold before the one it holds."""
    return next(seed for seed in range(100) if list(permutation(3, "units", seed, 0)[:2]) == [1, 0])


@pytest.mark.parametrize("settings", [{}, {"shard_mod": 3, "shard_rem": 0},
                                      {"shuffle_seed": _shuffle_seed(), "shuffle_window": 64}],
                         ids=["no-shard", "shard-0-of-3", "shuffled"])
def test_head_then_tail_is_the_hub_stream_byte_for_byte(hub, head, settings):
    """--local-path BOOTSTRAP --tail hub, read until 20+ batches past the last head batch, gives the batches of
    --source hub at the bootstrap's revision, byte for byte, with no shard, as reader 0 of 3 (whose share holds the
    bootstrap's rows), and shuffled."""
    revision = manifest_of(head)["revision"]
    got, stats = pull(tail_after_head=21, local_path=str(head), tail="hub", **settings)
    parts = stats["parts"]
    assert parts["head_batches"] > 0 and parts["tail_batches"] >= 21 and parts["boundary"]["step"] >= 1
    expected, _ = pull(len(got), source="hub", revision=revision, **settings)
    assert len(expected) == len(got)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


def _smoke(env: dict, out: Path, *args: str) -> subprocess.CompletedProcess:
    proc = run_fwe("smoke", "--local-path", str(out), "--tail", "hub", *SHAPE_FLAGS, *args, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_state_before_or_after_the_boundary_resumes_exactly_in_a_fresh_process(hub, head, tmp_path):
    """States saved 5 batches before and 5 after the boundary each resume, in a fresh process, with the batches an
    uninterrupted run gives next; the one in the tail reads none of the head's parts (they are garbage by then, of
    the same size and times, so reading them would change the batches or fail)."""
    out = own_copy(head, tmp_path)
    whole, stats = pull(tail_after_head=30, local_path=str(out), tail="hub")
    boundary = stats["parts"]["boundary"]["step"]  # the first tail batch (1-based)
    env = dict(hub.env(hub.new_home()))
    states = {}
    for name, taken in (("before", boundary - 6), ("after", boundary + 4)):
        states[name] = tmp_path / f"{name}.json"
        _smoke(env, out, "--batches", str(taken), "--save-state", str(states[name]), "--artifacts-dir",
               str(tmp_path / "artifacts"))
    for part in manifest_of(out)["files"]:
        path = out / part["name"]
        times = os.stat(path)
        path.write_bytes(b"\xff" * times.st_size)
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    npz = tmp_path / "after.npz"
    _smoke(env, out, "--batches", "10", "--resume-state", str(states["after"]), "--save-batches", str(npz),
           "--artifacts-dir", str(tmp_path / "artifacts"))
    assert np.array_equal(np.load(npz)["batches"], np.stack(whole[boundary + 4:boundary + 14]))
    shutil.rmtree(out)
    shutil.copytree(head, out)  # the same parts again (sizes, and times kept by copytree): the first state resumes
    npz = tmp_path / "before.npz"
    _smoke(env, out, "--batches", "15", "--resume-state", str(states["before"]), "--save-batches", str(npz),
           "--artifacts-dir", str(tmp_path / "artifacts"))
    assert np.array_equal(np.load(npz)["batches"], np.stack(whole[boundary - 6:boundary + 9]))


def test_an_unreachable_hub_serves_the_head_then_exits_4_naming_what_was_served(hub, head, tmp_path):
    """With the Hub unreachable, every document of the bootstrap is served, then the command exits 4 with a line
    that counts them and says the saved state resumes; once the Hub is back, that state resumes into the tail."""
    out = own_copy(head, tmp_path)
    whole, _ = pull(tail_after_head=10, local_path=str(out), tail="hub")
    state = tmp_path / "state.json"
    result = invoke("smoke", "--local-path", str(out), "--tail", "hub", *SHAPE_FLAGS, "--batches", "1000",
                    "--save-state", str(state), "--timeout", "60", "--artifacts-dir", str(tmp_path / "artifacts"),
                    env={"HF_ENDPOINT": dead_endpoint()})
    documents = manifest_of(out)["totals"]["documents"]
    assert result.exit_code == 4, result.stderr
    assert f"{documents} documents" in result.stderr and "resumes" in result.stderr
    served = orjson.loads(state.read_bytes())["batches"]
    assert 0 < served < len(whole), result.stderr
    artifact = orjson.loads(next((tmp_path / "artifacts" / "smoke").glob("*.json")).read_bytes())
    assert artifact["loader"]["parts"]["head_batches"] == served and artifact["error"]["type"] == "TailUnreachable"
    with FineWebLoader(resolve_config(env={}, **SHAPE, local_path=str(out), tail="hub"),
                       state=orjson.loads(state.read_bytes())) as loader:
        after = [next(loader).copy() for _ in range(5)]
        assert loader.stats()["parts"]["tail_batches"] > 0
    assert all(np.array_equal(a, b) for a, b in zip(after, whole[served:served + 5]))


def test_the_tail_in_a_library_loader_raises_a_named_source_error(hub, head, tmp_path, monkeypatch):
    """For a library user the boundary raises a SourceError subclass (exit 4 for the commands) naming the bootstrap
    and the documents served, after every batch of the head was handed over."""
    out = own_copy(head, tmp_path)
    monkeypatch.setenv("HF_ENDPOINT", dead_endpoint())
    served = 0
    with FineWebLoader(resolve_config(env={}, **SHAPE, local_path=str(out), tail="hub")) as loader:
        with pytest.raises(SourceError) as caught:
            for _ in loader:
                served += 1
        assert type(caught.value).__name__ == "TailUnreachable" and str(out) in str(caught.value)
        parts = loader.stats()["parts"]
        assert (parts["head_batches"], parts["tail_batches"]) == (served, 0)


def _grown(out: Path, before: dict) -> int:
    return manifest_of(out)["totals"]["documents"] - before["totals"]["documents"]


def test_grow_appends_the_tail_read_and_the_next_run_starts_after_it(hub, head, tmp_path):
    """After a --grow run that read K tail documents the bootstrap holds K more, verifies, and is the prefix of the
    Hub stream; the next run reads those K from disk: its Hub data requests are only for the rows after them."""
    out = own_copy(head, tmp_path)
    before = manifest_of(out)
    _, stats = pull(tail_after_head=420, local_path=str(out), tail="hub", grow=True)
    k = stats["source"]["tail_documents"]
    assert k > 0 and _grown(out, before) == k
    assert verify_bootstrap(str(out))["ok"]
    manifest = manifest_of(out)
    stop = manifest["hub_next"]
    assert _rows_before(stop) == stop["index"] == manifest["totals"]["documents"]
    assert stop["file"] >= 1, ("the growth crossed into the next file (the test needs it)", stop, stats)
    reference = tmp_path / "reference"
    run_bootstrap(bootstrap_config(out=str(reference), gb=1.0, source="hub", workers=0))
    assert _lines(out) == _lines(reference)[:manifest["totals"]["documents"]]
    hub.new_log("next")
    _, stats = pull(tail_after_head=5, local_path=str(out), tail="hub")
    assert stats["source"]["head_documents"] == manifest["totals"]["documents"]
    files = [f["path"].rsplit("/", 1)[-1] for f in manifest["hub_listing"]]
    read = {r["path"].rsplit("/", 1)[-1] for r in hub.requests() if "/resolve/" in r["path"]}
    assert read and not read & set(files[:stop["file"]])


def _rows_before(stop: dict) -> int:
    """Rows of the test Hub's stream before a position (3 files x 3 row groups x 100 rows, no bad rows)."""
    return stop["file"] * 300 + stop["group"] * 100 + stop["row"]


def _lines(out: Path) -> list[bytes]:
    return [line for part in manifest_of(out)["files"] for line in (out / part["name"]).read_bytes().splitlines()]


def test_bootstrap_with_a_larger_gb_extends_a_complete_one_from_where_it_stopped(hub, head, tmp_path):
    """`fwe bootstrap --gb N` on a complete bootstrap of less goes on from its recorded position, keeping its parts:
    the result is byte for byte the bootstrap a single run to N makes."""
    out = own_copy(head, tmp_path)
    kept = {part["name"]: part["sha256"] for part in manifest_of(out)["files"]}
    extended = run_bootstrap(bootstrap_config(out=str(out), gb=0.001, source="hub", workers=0, file_mb=PART_MB))
    single = run_bootstrap(bootstrap_config(out=str(tmp_path / "single"), gb=0.001, source="hub", workers=0,
                                            file_mb=PART_MB))
    assert extended["outcome"] == "target reached" and extended["documents"] == single["documents"]
    assert _lines(out) == _lines(tmp_path / "single")
    assert all(part["sha256"] == kept[part["name"]] for part in manifest_of(out)["files"] if part["name"] in kept)
    assert verify_bootstrap(str(out))["ok"]


def test_grow_after_a_kill_9_verifies_and_the_next_run_continues(hub3, head, tmp_path):
    """kill -9 while a --grow run appends leaves a bootstrap that --verify accepts, whose parts are a prefix of the
    Hub stream, and that the next --grow run continues (it holds more afterwards, still a prefix)."""
    out = own_copy(head, tmp_path)
    before = manifest_of(out)
    run = HubRun(hub3, tmp_path / "hub")
    run.set_faults(stall_match="002_00000.parquet")  # the third file never comes: the run waits there, growing
    env = fwe_env(**client_env(hub3.url, run.new_home()))
    proc = subprocess.Popen([sys.executable, "-m", "fwe_cli", "smoke", "--local-path", str(out), "--tail", "hub",
                             "--grow", *SHAPE_FLAGS, "--batches", "100000", "--timeout", "600", "--artifacts-dir",
                             str(tmp_path / "artifacts")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240  # protection against a hang only: the condition ends the wait
        while "first" not in manifest_of(out)["hub_files"][1]:
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before growing into file 1"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        run.close()
    assert verify_bootstrap(str(out))["ok"]
    killed = manifest_of(out)["totals"]["documents"]
    assert _rows_before(manifest_of(out)["hub_next"]) == killed  # each listed part moved the position with it
    assert killed > before["totals"]["documents"]
    reference = tmp_path / "reference"
    with pytest.MonkeyPatch.context() as monkeypatch:
        _point_at(monkeypatch, hub3.url, run.new_home())
        run_bootstrap(bootstrap_config(out=str(reference), gb=1.0, source="hub", workers=0))
        assert _lines(out) == _lines(reference)[:killed]
        pull(tail_after_head=40, local_path=str(out), tail="hub", grow=True)
    assert verify_bootstrap(str(out))["ok"]
    assert manifest_of(out)["totals"]["documents"] > killed
    assert _lines(out) == _lines(reference)[:manifest_of(out)["totals"]["documents"]]


def test_a_bootstrap_kept_in_a_bucket_continues_from_the_hub(hub, head, s3):
    """The bootstrap's files put in a bucket: --local-path s3://bucket/boot --tail hub gives the batches of the same
    bootstrap on disk continued from the Hub (its head read from the bucket, its tail from the Hub); --grow over the
    bucket is refused in one line naming the URL (its parts are not appended in a bucket)."""
    from fwe_cli.errors import ConfigError

    s3.bucket("fwe-head-tail")
    for path in sorted(head.iterdir()):
        if path.is_file():
            s3.put("fwe-head-tail", f"boot/{path.name}", path.read_bytes())
    url = "s3://fwe-head-tail/boot"
    got, stats = pull(tail_after_head=3, local_path=url, tail="hub")
    assert stats["parts"]["head_batches"] > 0 and stats["source"]["path"] == url
    expected, _ = pull(len(got), local_path=str(head), tail="hub")
    assert len(got) == len(expected) and all(np.array_equal(a, b) for a, b in zip(got, expected))
    with pytest.raises(ConfigError, match=f"--grow appends the Hub tail to a bootstrap on this disk; {url} is in"):
        pull(1, local_path=url, tail="hub", grow=True)


@pytest.mark.parametrize("args, words", [
    (("--grow",), "--grow appends the Hub tail"),
    (("--tail", "s3"), "--tail must be one of hub"),
    (("--source", "synthetic", "--tail", "hub"), "--local-path BOOTSTRAP_DIR"),
])
def test_tail_and_grow_misuse_is_one_line_naming_the_flag(args, words, tmp_path):
    """--grow without --tail, an unknown tail and --tail on a source that is not a local path exit 2 in one line."""
    result = invoke("smoke", *(("--local-path", str(tmp_path)) if "--source" not in args else ()), *args,
                    "--artifacts-dir", str(tmp_path / "artifacts"))
    assert result.exit_code == 2, result.stderr
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_tail_refuses_a_bootstrap_that_is_not_of_the_hub(tmp_path, synthetic_jsonl):
    """--tail hub over a bootstrap of local files says it needs a bootstrap of the Hub, naming it (exit 2)."""
    out = tmp_path / "local-boot"
    run_bootstrap(bootstrap_config(out=str(out), gb=0.0001, local_path=str(synthetic_jsonl)))
    result = invoke("smoke", "--local-path", str(out), "--tail", "hub", "--artifacts-dir", str(tmp_path / "a"))
    assert result.exit_code == 2, result.stderr
    assert "records no Hub listing" in result.stderr and str(out) in result.stderr


def test_grow_reads_without_growing_while_another_run_holds_the_bootstrap(hub, head, tmp_path):
    """While another run holds the bootstrap's lock (another rank growing it, `fwe bootstrap` extending it), a
    --grow loader says so in one note and reads the same batches without writing anything."""
    from fwe_cli.errors import FweNotice
    from fwe_cli.loader.files.bootstrap_format import Layout
    from fwe_cli.output.lock import OutputLock

    out = own_copy(head, tmp_path)
    before = (out / "manifest.json").read_bytes()
    expected, _ = pull(tail_after_head=5, local_path=str(out), tail="hub")
    with OutputLock(Layout.for_out(str(out))), pytest.warns(FweNotice, match="not growing"):
        got, stats = pull(tail_after_head=5, local_path=str(out), tail="hub", grow=True)
    assert stats["source"]["grown"]["documents"] == 0
    assert (out / "manifest.json").read_bytes() == before
    assert all(np.array_equal(a, b) for a, b in zip(got, expected)) and len(got) == len(expected)


def test_grow_refuses_a_bootstrap_of_all_fields(hub, tmp_path):
    """--grow on a --fields all bootstrap exits 2 in one line naming it (the loader reads only text and id)."""
    out = tmp_path / "all-fields"
    run_bootstrap(bootstrap_config(out=str(out), gb=HEAD_GB, source="hub", workers=0, fields="all"))
    result = invoke("smoke", "--local-path", str(out), "--tail", "hub", "--grow", *SHAPE_FLAGS,
                    "--artifacts-dir", str(tmp_path / "artifacts"))
    assert result.exit_code == 2, result.stderr
    assert "--fields all" in result.stderr and str(out) in result.stderr


def test_a_state_saved_before_growth_resumes_after_it(hub, head, tmp_path):
    """Parts appended by --grow move no position: a state saved before another run grew the bootstrap resumes with
    the batches the uninterrupted run gives next (and the grown documents now come from disk)."""
    out = own_copy(head, tmp_path)
    whole, _ = pull(tail_after_head=20, local_path=str(out), tail="hub")  # past the old boundary
    with FineWebLoader(resolve_config(env={}, **SHAPE, local_path=str(out), tail="hub")) as loader:
        for _ in range(40):
            next(loader)
        state = loader.state_dict()
    pull(tail_after_head=30, local_path=str(out), tail="hub", grow=True)
    assert manifest_of(out)["totals"]["documents"] > manifest_of(head)["totals"]["documents"]
    with FineWebLoader(resolve_config(env={}, **SHAPE, local_path=str(out), tail="hub"), state=state) as loader:
        after = [next(loader).copy() for _ in range(len(whole) - 40)]
    assert all(np.array_equal(a, b) for a, b in zip(after, whole[40:]))

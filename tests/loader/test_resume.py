"""Exact resume: N batches in one run equal k batches, then N-k from a loader started at the first run's state,
byte for byte, for every source, with Q, doc batch, prefetch and tokenizer threads changed between the halves;
and the state refuses to be used under settings it was not saved with."""

from __future__ import annotations

import gzip

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fwe_cli.errors import ConfigError, EndOfData
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from tests.bootstrap.support import core_run
from tests.helpers import write_jsonl
from tests.hubsim.repos import CONFIG_NAME, DATASET_REPO
from tests.loader.token_dirs import write_token_dir

FIRST = {"queue_depth": 2, "doc_batch": 7, "tokenizer_threads": 1, "prefetch": True}
SECOND = {"queue_depth": 5, "doc_batch": 64, "tokenizer_threads": 2, "prefetch": False}


def pull(config, n, state=None):
    """(up to n batches, the state after them) from a fresh loader, started at `state` (sent through JSON)."""
    if state is not None:
        state = orjson.loads(orjson.dumps(state))
    loader = FineWebLoader(config, state=state)
    out = []
    try:
        for _ in range(n):
            out.append(np.array(loader.next_batch()))
    except EndOfData:
        pass
    state = loader.state_dict()
    loader.close()
    return out, state


def assert_resumes(make, n=12, k=5):
    """make(**knobs) -> config. The whole run == first k + the resumed rest."""
    whole, _ = pull(make(**FIRST), n)
    assert len(whole) == n
    first, state = pull(make(**FIRST), k)
    rest, _ = pull(make(**SECOND), n - k, state)
    assert len(first) + len(rest) == n
    for i, (a, b) in enumerate(zip(whole, first + rest)):
        assert np.array_equal(a, b), f"batch {i} differs"


def records(n=120, seed=5):
    return [synthetic_record(seed, i) for i in range(n)]


@pytest.fixture(scope="module")
def local_files(tmp_path_factory):
    """The same 240 documents as JSONL in two files, TXT, parquet (small row groups) and JSONL.gz."""
    root = tmp_path_factory.mktemp("resume")
    docs = records(240)
    for kind in ("jsonl", "txt", "parquet", "gz"):
        (root / kind).mkdir()
    write_jsonl(root / "jsonl" / "a.jsonl", docs[:120])
    write_jsonl(root / "jsonl" / "b.jsonl", docs[120:])
    (root / "txt" / "docs.txt").write_text("".join(d["text"].replace("\n", " ") + "\n" for d in docs))
    table = pa.table({"text": [d["text"] for d in docs], "id": [d["id"] for d in docs]})
    pq.write_table(table, root / "parquet" / "docs.parquet", row_group_size=17)
    with gzip.open(root / "gz" / "docs.jsonl.gz", "wb") as handle:
        handle.write(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    return root


@pytest.mark.parametrize("kind", ["jsonl", "txt", "parquet", "gz"])
@pytest.mark.parametrize("tokenizer", ["byte", "gpt2"])
def test_local_files_resume_exactly(local_files, kind, tokenizer):
    """Local JSONL (two files), TXT, parquet and JSONL.gz: byte-identical batches across a resume."""
    assert_resumes(lambda **kw: resolve_config(env={}, local_path=str(local_files / kind), tokenizer=tokenizer,
                                               seq_len=256, batch_size=4, **kw))


def test_bootstrap_directory_resumes_exactly(tmp_path):
    """A bootstrap directory (several parts) resumes exactly."""
    out = tmp_path / "boot"
    core_run(out, source="synthetic", seed=3, target_bytes=400_000, file_mb=0.1)
    assert_resumes(lambda **kw: resolve_config(env={}, local_path=str(out), tokenizer="byte", seq_len=512,
                                               batch_size=4, **kw))


@pytest.mark.parametrize("tokenizer", ["byte", "gpt2"])
def test_token_directory_resumes_exactly(tmp_path, tokenizer):
    """A token directory (shards of pre-tokenized documents): exact across a resume with Q and doc batch changed,
    read in order (chunks of many documents), as shard 1 of 3, and shuffled over 2 epochs (across an epoch)."""
    out = write_token_dir(tmp_path / "tokens", [d["text"] for d in records(240)], tokenizer, docs_per_shard=70)

    def make(**settings):
        return lambda **kw: resolve_config(env={}, local_path=str(out), tokenizer=tokenizer, seq_len=128,
                                           batch_size=4, **settings, **kw)

    n = 60 if tokenizer == "byte" else 30
    assert_resumes(make(), n=n, k=n // 2 + 3)
    assert_resumes(make(shard_mod=3, shard_rem=1), n=n // 2, k=n // 4)
    assert_resumes(make(shuffle_seed=11, shuffle_window=50, epochs=2), n=n * 2, k=n + n // 2 + 1)


def test_synthetic_resumes_exactly_and_in_a_shard():
    """The synthetic source resumes exactly, also as shard 1 of 3."""
    assert_resumes(lambda **kw: resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=256,
                                               batch_size=2, **kw))
    assert_resumes(lambda **kw: resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=256,
                                               batch_size=2, shard_mod=3, shard_rem=1, **kw))


def test_shuffled_stream_over_epochs_resumes_exactly(local_files):
    """With a shuffle seed (windows of 50) over 3 epochs, a resume mid-window and across epochs is exact."""
    assert_resumes(lambda **kw: resolve_config(env={}, local_path=str(local_files / "jsonl"), tokenizer="byte",
                                               seq_len=512, batch_size=4, shuffle_seed=11, shuffle_window=50,
                                               epochs=3, **kw), n=40, k=23)


def test_native_hub_reader_resumes_exactly_and_pins_the_commit(hub_env):
    """The native Hub reader resumes exactly (positions are file, row group, row: the resumed run reads from that
    row group, not the stream's start), and the state records the commit it read."""
    def make(**kw):
        return resolve_config(env={}, source="hub", dataset=DATASET_REPO, name=CONFIG_NAME, tokenizer="byte",
                              seq_len=1024, batch_size=4, **kw)

    assert_resumes(make, n=30, k=17)
    _, state = pull(make(**FIRST), 3)
    assert len(state["matching"]["source"]["revision"]) == 40
    assert state["position"]["doc"]["window"]["end_at"]["type"] == "hub_row"


def test_state_refuses_other_settings_naming_them(local_files):
    """A state saved with one batch shape, tokenizer, shard, shuffle or set of files is refused by a loader with
    another, and the error names the setting; an unknown version is refused too, and one of an fwe that read every
    document on every rank (version 3) in one line naming its version."""
    base = dict(env={}, local_path=str(local_files / "jsonl"), tokenizer="byte", seq_len=256, batch_size=4)
    _, state = pull(resolve_config(**base), 2)
    for change, name in (({"seq_len": 128}, "seq_len"), ({"tokenizer": "gpt2"}, "tokenizer"),
                         ({"shard_mod": 2, "shard_rem": 0}, "shard_mod"), ({"shuffle_seed": 1}, "shuffle_seed"),
                         ({"local_path": str(local_files / "jsonl" / "a.jsonl")}, "source.local_path")):
        with pytest.raises(ConfigError, match=f"resume state was saved with {name}="):
            FineWebLoader(resolve_config(**{**base, **change}), state=state)
    with pytest.raises(ConfigError, match="not a fwe loader resume state"):
        FineWebLoader(resolve_config(**base), state={"version": 99})
    old = dict(state, version=3, position={"doc": {"epoch": 0, "index": 7, "at": None, "k": 0}, "skip": 3})
    with pytest.raises(ConfigError, match=r"^the resume state is of version 3, .* start without it"):
        FineWebLoader(resolve_config(**base), state=old)


def test_load_state_dict_restarts_an_existing_loader(local_files):
    """`load_state_dict` on a loader that already produced batches continues from the state (the Stateful
    protocol: a training framework loads the state into the loader it built)."""
    config = resolve_config(env={}, local_path=str(local_files / "jsonl"), tokenizer="byte", seq_len=256,
                            batch_size=4)
    whole, _ = pull(config, 8)
    _, state = pull(config, 3)
    loader = FineWebLoader(config)
    loader.next_batch()
    loader.load_state_dict(orjson.loads(orjson.dumps(state)))
    rest = [np.array(loader.next_batch()) for _ in range(5)]
    loader.close()
    assert all(np.array_equal(a, b) for a, b in zip(whole[3:], rest))


def test_end_of_data_is_named_and_iteration_just_ends(local_files):
    """next_batch raises EndOfData after the last batch; a for loop over the loader ends without an exception."""
    config = resolve_config(env={}, local_path=str(local_files / "jsonl" / "a.jsonl"), tokenizer="byte",
                            seq_len=1024, batch_size=8)
    with FineWebLoader(config) as loader:
        count = sum(1 for _ in loader)
    assert count > 0
    with FineWebLoader(config) as loader:
        for _ in range(count):
            loader.next_batch()
        with pytest.raises(EndOfData):
            loader.next_batch()


def test_resumed_stream_reads_from_its_position_not_the_start(local_files, monkeypatch):
    """Resuming deep into a stream opens the source at the saved position: the first file is not read at all and
    the second is read from the saved byte offset on (O(1) in the position, not O(k))."""
    import fwe_cli.loader.files.formats as local

    def make(**kw):
        return resolve_config(env={}, local_path=str(local_files / "jsonl"), tokenizer="byte", seq_len=1024,
                              batch_size=4, **kw)

    _, state = pull(make(**FIRST), 150)
    assert state["position"]["doc"]["window"]["end_at"]["file"] == 1  # inside b.jsonl (documents 120-239)
    reads, read_lines = [], local.read_lines
    monkeypatch.setattr(local, "read_lines", lambda path, start=0, *args: (reads.append((path, start)),
                                                                         read_lines(path, start, *args))[1])
    resumed, _ = pull(make(**SECOND), 1, state)
    assert resumed and reads and all(path.endswith("b.jsonl") and start > 0 for path, start in reads)


def test_smoke_save_state_then_resume_state_in_fresh_processes(local_files, tmp_path):
    """`fwe smoke --save-state` after 2 batches, then a fresh `fwe smoke --resume-state` for 4 more (with another
    Q and doc batch): the 6 batches equal one run's 6, byte for byte."""
    from tests.helpers import run_fwe

    common = ("smoke", "--local-path", str(local_files / "jsonl"), "--tokenizer", "byte", "--seq-len", "256",
              "--batch", "4", "--artifacts-dir", str(tmp_path / "artifacts"))
    state = tmp_path / "state.json"
    runs = [run_fwe(*common, "--batches", "6", "--save-batches", str(tmp_path / "all.npz")),
            run_fwe(*common, "--batches", "2", "--save-state", str(state), "--save-batches", str(tmp_path / "a.npz")),
            run_fwe(*common, "--batches", "4", "--resume-state", str(state), "--q", "7", "--doc-batch", "3",
                    "--save-batches", str(tmp_path / "b.npz"))]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
    whole = np.load(tmp_path / "all.npz")["batches"]
    halves = np.concatenate([np.load(tmp_path / "a.npz")["batches"], np.load(tmp_path / "b.npz")["batches"]])
    assert np.array_equal(whole, halves)


def test_smoke_refuses_a_resume_state_saved_with_another_seq_len(local_files, tmp_path):
    """`fwe smoke --resume-state` with a state saved at --seq-len 256 and run at 128: a usage error (exit 2) naming
    the setting and the value it was saved with, and no batch."""
    from tests.helpers import invoke

    common = ("smoke", "--local-path", str(local_files / "jsonl"), "--tokenizer", "byte", "--batch", "4",
              "--batches", "1", "--artifacts-dir", str(tmp_path / "artifacts"))
    state = tmp_path / "state.json"
    saved = invoke(*common, "--seq-len", "256", "--save-state", str(state))
    assert saved.exit_code == 0 and state.exists(), saved.stderr
    bad = invoke(*common, "--seq-len", "128", "--resume-state", str(state), "--json")
    assert bad.exit_code == 2 and "resume state was saved with seq_len=256" in " ".join(bad.stderr.split())
    data = orjson.loads(bad.stdout)
    assert data["error"]["type"] == "ConfigError" and "batches" not in data  # the error object: no run was made

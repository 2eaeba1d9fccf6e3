"""`fwe bootstrap --holdout F --holdout-split train|holdout` writes one side of the held-out split: the same documents
the loader's split gives (records and documents are keyed alike, by id or else by text), each once over the shards,
resumable exactly, refused against an output made with another split; the native Hub reader (whole files) is refused
with the way out, and the `datasets` reader writes the held-out rows of the test Hub."""

from __future__ import annotations

from itertools import count
from pathlib import Path

import orjson
import pytest

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.errors import ConfigError, OutputError
from fwe_cli.loader.config import Shard, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.sources.spec import SourceSpec, held_out
from fwe_cli.loader.stream import DocumentStream
from tests.bootstrap.support import assert_same_output, core_run, lines_of, manifest_of
from tests.bootstrap.test_sources import _resumes_exactly
from tests.helpers import run_fwe, write_jsonl


@pytest.fixture()
def source(tmp_path) -> Path:
    """600 synthetic FineWeb-Edu records (with ids), about 1.3 MB."""
    return write_jsonl(tmp_path / "src.jsonl", [synthetic_record(9, i) for i in range(600)])


def _loader_side(path: Path, side: str, key: str) -> list:
    return [getattr(doc, key) for doc in DocumentStream(resolve_config(env={}, local_path=str(path), holdout=0.2,
                                                                       holdout_split=side))]


def test_the_shards_of_both_sides_hold_every_document_once_as_the_loader_splits_them(tmp_path, source):
    """Both sides on 3 nodes: the 6 outputs hold each of the 600 documents once, and each side's documents are the
    loader's for that side (ids, in the loader's order on one node)."""
    staged: dict[str, list[str]] = {"train": [], "holdout": []}
    for side in staged:
        for rem in range(3):
            out = tmp_path / f"{side}-{rem}"
            result = core_run(out, gb=1, local_path=str(source), holdout=0.2, holdout_split=side, shard_mod=3,
                              shard_rem=rem)
            assert result["complete"] and result["holdout"]["holdout_split"] == side
            assert manifest_of(out)["holdout"] == {"holdout": 0.2, "holdout_split": side}
            staged[side] += [orjson.loads(line)["id"] for line in lines_of(out)]
    every = staged["train"] + staged["holdout"]
    assert len(every) == len(set(every)) == 600
    for side in staged:
        assert sorted(staged[side]) == sorted(_loader_side(source, side, "id"))
    one = core_run(tmp_path / "one", gb=1, local_path=str(source), holdout=0.2, holdout_split="holdout")
    assert [orjson.loads(line)["id"] for line in lines_of(tmp_path / "one")] == _loader_side(source, "holdout", "id")
    assert one["holdout"]["documents_kept"] + one["holdout"]["documents_removed"] == 600


def test_lines_without_ids_are_split_by_their_text_as_the_loader_splits_them(tmp_path):
    """A TXT file (no ids): the bootstrap's held-out lines are the loader's held-out documents."""
    txt = tmp_path / "lines.txt"
    txt.write_text("".join(f"line number {i}\n" for i in range(500)))
    core_run(tmp_path / "out", gb=1, local_path=str(txt), holdout=0.2, holdout_split="holdout")
    staged = [orjson.loads(line)["text"] for line in lines_of(tmp_path / "out")]
    assert staged == _loader_side(txt, "holdout", "text") and 60 < len(staged) < 140


def test_records_resume_exactly_inside_the_split(source):
    """The split's record positions ({"index", "child"}), sharded 2 of 3: from the position saved after any record,
    a new stream yields exactly the records that followed."""
    _resumes_exactly(held_out(SourceSpec.of("local", local_path=str(source)), 0.5, "holdout"), Shard(3, 2))
    _resumes_exactly(held_out(SourceSpec.of("synthetic", seed=2), 0.3), Shard(2, 1), limit=40)


def test_an_interrupted_bootstrap_of_a_side_resumes_to_the_same_bytes(tmp_path, source):
    """Stopped after about 192 records and run again, the train side ends byte-identical to an uninterrupted run;
    a re-run with another fraction, or none, is refused naming --holdout."""
    flags = dict(gb=1, local_path=str(source), holdout=0.2, file_mb=0.3, checkpoint_mb=0.1)
    core_run(tmp_path / "want", **flags)
    polls = count()
    first = run_bootstrap(bootstrap_config(out=str(tmp_path / "got"), **flags), should_stop=lambda: next(polls) >= 2)
    assert first["outcome"] == "interrupted"
    for other in (dict(flags, holdout=0.3), {k: v for k, v in flags.items() if k != "holdout"}):
        with pytest.raises(OutputError, match="--holdout"):
            core_run(tmp_path / "got", **other)
    assert core_run(tmp_path / "got", **flags)["complete"]
    assert_same_output(tmp_path / "got", tmp_path / "want")


def test_the_native_hub_reader_is_refused_with_the_way_out(tmp_path):
    """The native reader copies whole files: a split of the Hub is a usage error naming --hub-reader datasets."""
    with pytest.raises(ConfigError, match="--hub-reader datasets"):
        bootstrap_config(out=str(tmp_path / "out"), gb=1, holdout=0.1)
    with pytest.raises(ConfigError, match="--holdout must be a fraction .* got 2"):
        bootstrap_config(out=str(tmp_path / "out"), gb=1, holdout=2, hub_reader="datasets")


def test_the_datasets_reader_writes_the_held_out_rows_of_the_hub(hub_env, tmp_path):
    """`fwe bootstrap --hub-reader datasets --holdout 0.1 --holdout-split holdout` against the test Hub: its lines are
    the held-out documents of the native loader's split, in order, at the commit the Hub names."""
    out = tmp_path / "eval"
    proc = run_fwe("bootstrap", "--gb", "1", "--out", str(out), "--hub-reader", "datasets", "--holdout", "0.1",
                   "--holdout-split", "holdout", "--artifacts-dir", str(tmp_path / "artifacts"),
                   env=hub_env.env(hub_env.new_home()))
    assert proc.returncode == 0, proc.stderr
    stream = DocumentStream(resolve_config(env={}, source="hub", holdout=0.1, holdout_split="holdout"))
    try:
        expected = [doc.id for doc in stream]
    finally:
        stream.close()
    manifest = manifest_of(out)
    assert [orjson.loads(line)["id"] for line in lines_of(out)] == expected and len(expected) > 100
    assert manifest["hub_reader"] == "datasets" and len(manifest["revision"]) == 40

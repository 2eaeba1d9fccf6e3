"""`fwe tokenize --holdout F --holdout-split train|holdout` tokenizes one side of the held-out split: the loader's
documents of that side, in its order; split into tasks, interrupted and resumed, it ends as one run's shards; an
output or a task made with another split is refused naming --holdout."""

from __future__ import annotations

from itertools import count
from pathlib import Path

import numpy as np
import pytest

from fwe_cli.errors import OutputError
from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.tokens.run import TokenizeConfig, run_tokenize
from fwe_cli.tokens.split import TaskSplit
from tests.helpers import write_jsonl
from tests.tokens.support import assert_same_output, cli, core_run, manifest_of

SPLIT = dict(holdout=0.25, shard_tokens=5000)  # spans of 80 kB: each file is a span, written as several shards


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """300 synthetic documents (with ids) in 3 JSONL files, about 0.7 MB."""
    directory = tmp_path_factory.mktemp("src")
    for number in range(3):
        write_jsonl(directory / f"part-{number}.jsonl", [synthetic_record(4, 100 * number + i) for i in range(100)])
    return directory


def _texts(path: Path, **split) -> list[str]:
    """The documents the loader reads at `path`: the text of a source, the bytes of a byte-token directory."""
    docs = DocumentStream(resolve_config(env={}, local_path=str(path), **split))
    return [doc.text if doc.ids is None else bytes(doc.ids.astype(np.uint8)).decode() for doc in docs]


def test_each_side_is_the_loaders_side_and_together_every_document(tmp_path, source):
    """Both sides tokenized (byte): read back, each is the loader's documents of that side in order; together they
    are the 300 documents once; the result counts what the split kept and passed over."""
    sides = {}
    for side in ("train", "holdout"):
        result = core_run(source, tmp_path / side, "byte", holdout_split=side, **SPLIT)
        assert result["holdout"] == {"holdout": 0.25, "holdout_split": side, "documents_kept": result["documents"],
                                     "documents_removed": 300 - result["documents"]}
        assert manifest_of(tmp_path / side)["source"]["holdout"] == {"holdout": 0.25, "holdout_split": side}
        sides[side] = _texts(tmp_path / side)
        assert sides[side] == _texts(source, holdout=0.25, holdout_split=side)
    assert sorted(sides["train"] + sides["holdout"]) == sorted(_texts(source)) and 40 < len(sides["holdout"]) < 110


def test_two_tasks_and_an_interrupted_run_end_as_the_single_runs_shards(tmp_path, source):
    """The held-out side in 2 tasks (merged by the last), and in one run stopped after its second document batch and
    run again: both end byte-identical to an uninterrupted single run."""
    core_run(source, tmp_path / "want", "byte", holdout_split="holdout", **SPLIT)
    for task in range(2):
        core_run(source, tmp_path / "tasks", "byte", holdout_split="holdout", split=TaskSplit(task, 2), **SPLIT)
    assert_same_output(tmp_path / "tasks", tmp_path / "want")
    polls = count()
    config = TokenizeConfig(src=str(source), out=str(tmp_path / "got"), tokenizer="byte", holdout_split="holdout",
                            **SPLIT)
    assert run_tokenize(config, should_stop=lambda: next(polls) >= 1)["outcome"] == "interrupted"
    assert core_run(source, tmp_path / "got", "byte", holdout_split="holdout", **SPLIT)["complete"]
    assert_same_output(tmp_path / "got", tmp_path / "want")


def test_another_split_is_refused_for_an_output_and_for_a_task(tmp_path, source):
    """An output made with --holdout 0.25 train is not continued with another fraction, the other side or none
    (exit 8 naming --holdout/--holdout-split); a task of another split is not merged with the others."""
    core_run(source, tmp_path / "out", "byte", **SPLIT)
    for other in (dict(SPLIT, holdout=0.5), dict(SPLIT, holdout_split="holdout"), {"shard_tokens": 5000}):
        with pytest.raises(OutputError, match="--holdout/--holdout-split"):
            core_run(source, tmp_path / "out", "byte", force=False, **other)
    args = (str(source), "--tokenizer", "byte", "--out", str(tmp_path / "t"), "--shard-tokens", "5000", "--tasks", "2")
    assert cli(*args, "--task", "0", "--holdout", "0.25", tmp=tmp_path).exit_code == 0
    refused = cli(*args, "--task", "1", "--holdout", "0.3", tmp=tmp_path)
    assert refused.exit_code == 8 and "--holdout/--holdout-split" in refused.stderr
    assert not (tmp_path / "t" / "manifest.json").exists()

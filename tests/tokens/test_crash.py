"""Crash safety of `fwe tokenize`: killed with SIGKILL at any point of the write protocol, or stopped by Ctrl-C, a
re-run of the same command ends with shards and indexes byte-identical to an uninterrupted run's.

The interrupted runs need a process of their own; the re-runs go through the command in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from tests.helpers import write_jsonl
from tests.tokens.support import assert_same_output, cli, core_run, killed_then_rerun, manifest_of, run_in_own_process

SHARD_TOKENS = "60000"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """800 synthetic documents (about 0.58 M GPT-2 tokens: 4 encode batches of 256 documents, 10 shards): every point
    below is reached before the last batch and the last shard."""
    return write_jsonl(tmp_path_factory.mktemp("src") / "docs.jsonl", [synthetic_record(5, i) for i in range(800)])


@pytest.fixture(scope="module")
def reference(tmp_path_factory, source, gpt2_tokenizer_json) -> Path:
    """The uninterrupted run every interrupted one must end up identical to."""
    out = tmp_path_factory.mktemp("ref") / "out"
    core_run(source, out, gpt2_tokenizer_json, shard_tokens=int(SHARD_TOKENS))
    return out


@pytest.mark.parametrize("point", [
    "tokens-batch:3",   # mid-shard: tokens of a batch handed to a shard still being written
    "shard-fsynced:2",  # shard 1 and its index fsynced under temporary names, not renamed
    "shard-renamed:4",  # shard 3 renamed to its final name; the manifest does not list it yet
    "manifest-tmp:4",   # the manifest listing shard 2 written under its temporary name, not renamed
])
def test_sigkill_then_rerun_is_byte_identical(tmp_path, source, reference, gpt2_tokenizer_json, point):
    """kill -9 at a point of the write protocol leaves an incomplete manifest; the same command re-run resumes
    from the last listed shard and ends byte-identical, file by file, to an uninterrupted run, with no temporary
    files left."""
    out = tmp_path / "out"
    args = (str(source), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--shard-tokens", SHARD_TOKENS)
    before, _ = killed_then_rerun(point, out, *args, tmp=tmp_path)
    assert_same_output(out, reference)
    assert manifest_of(out)["runs"][-1]["resumed_from_shards"] == len(before["shards"])


def test_ctrl_c_stops_exits_130_and_the_rerun_is_identical(tmp_path, source, reference, gpt2_tokenizer_json):
    """SIGINT (sent by the run itself at its 2nd encoded batch, through the real handler: no race with the run's
    end) exits 130 saying to re-run, leaves only whole listed shards, and the re-run ends identical."""
    out = tmp_path / "out"
    args = (str(source), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--shard-tokens", SHARD_TOKENS)
    stopped = run_in_own_process(*args, tmp=tmp_path, env={"FWE_TEST_SIGINT_AT": "tokens-batch:2"})
    assert stopped.returncode == 130, stderr_tail(stopped.stderr)
    assert "re-run the same command" in stopped.stderr
    manifest = manifest_of(out)
    assert manifest["complete"] is False and len(manifest["shards"]) >= 1
    assert not list(out.glob("*.partial"))
    done = cli(*args, tmp=tmp_path)
    assert done.exit_code == 0, done.stderr
    assert_same_output(out, reference)


def test_a_complete_output_is_confirmed_not_rewritten(tmp_path, source, reference, gpt2_tokenizer_json):
    """Re-running a finished output changes nothing and says already_complete."""
    import orjson

    out = tmp_path / "out"
    args = (str(source), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--shard-tokens", SHARD_TOKENS)
    assert cli(*args, tmp=tmp_path).exit_code == 0
    again = cli(*args, "--json", tmp=tmp_path)
    assert again.exit_code == 0 and orjson.loads(again.stdout)["outcome"] == "already_complete"
    assert_same_output(out, reference)


def stderr_tail(text: str) -> str:
    return text[-2000:]

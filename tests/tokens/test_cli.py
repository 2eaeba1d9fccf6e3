"""`fwe tokenize` as a command: one writer per output (exit 8 naming the holder's PID), refusals of an output made
with other arguments (one line, exit 8), usage errors (exit 2), --json and the artifact, --verify, and
`fwe bootstrap --tokenize`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.files.token_shards import read_shard
from tests.helpers import invoke, write_jsonl
from tests.tokens.support import TOKENS_OUTPUT, cli, file_hashes, manifest_of, reference_gpt2


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("src") / "docs.jsonl", [synthetic_record(9, i) for i in range(60)])


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_second_run_while_the_lock_is_held_exits_8_naming_the_pid(tmp_path, source):
    """While another process holds the output's lock, a run is refused at once with exit 8 and one line that
    names that process's PID; it writes nothing."""
    out = tmp_path / "out"
    with TOKENS_OUTPUT.lock_held_elsewhere(out) as holder:
        refused = cli(str(source), "--tokenizer", "byte", "--out", str(out), tmp=tmp_path)
    assert refused.exit_code == 8, refused.stderr
    (line,) = _error_lines(refused.stderr)
    assert f"pid {holder.pid}" in line and "another fwe tokenize" in line
    assert not (out / "manifest.json").exists()


def test_resuming_with_another_tokenizer_is_refused_in_one_line(tmp_path, source, gpt2_tokenizer_json):
    """An output made with one tokenizer is never continued (or confirmed) with another: exit 8, one line naming
    both tokenizers and the ways out; the shards are untouched."""
    out = tmp_path / "out"
    assert cli(str(source), "--tokenizer", "byte", "--out", str(out), "--shard-tokens", "20000",
               tmp=tmp_path).exit_code == 0
    before = file_hashes(out)
    refused = cli(str(source), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--shard-tokens", "20000",
                  tmp=tmp_path)
    assert refused.exit_code == 8, refused.stderr
    (line,) = _error_lines(refused.stderr)
    assert "--tokenizer 'byte' there" in line and "--force" in line
    assert file_hashes(out) == before
    other_size = cli(str(source), "--tokenizer", "byte", "--out", str(out), "--shard-tokens", "30000", tmp=tmp_path)
    assert other_size.exit_code == 8 and "--shard-tokens 20000 there, 30000 now" in other_size.stderr


def test_force_replaces_an_output_made_with_another_tokenizer(tmp_path, source, gpt2_tokenizer_json):
    """--force starts over: the output then holds the new tokenizer's ids (checked against the reference)."""
    out = tmp_path / "out"
    assert cli(str(source), "--tokenizer", "byte", "--out", str(out), tmp=tmp_path).exit_code == 0
    done = cli(str(source), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--force", "--json", tmp=tmp_path)
    assert done.exit_code == 0, done.stderr
    manifest = manifest_of(out)
    tokens = np.concatenate([read_shard(str(out / s["name"]))[0] for s in manifest["shards"]])
    texts = [orjson.loads(line)["text"] for line in source.read_bytes().splitlines()]
    assert np.array_equal(tokens.astype(np.int64), reference_gpt2(texts))


def test_json_result_artifact_and_verify(tmp_path, source):
    """--json prints the result object (stdout holds only it, the Hub requests by kind among it: none for local text
    and the byte tokenizer), an artifact records it, and --verify re-hashes the shards: OK (exit 0) when intact,
    FAILED (exit 1) naming a shard whose bytes changed."""
    out = tmp_path / "out"
    done = cli(str(source), "--tokenizer", "byte", "--out", str(out), "--shard-tokens", "20000", "--json",
               tmp=tmp_path)
    assert done.exit_code == 0, done.stderr
    result = orjson.loads(done.stdout)
    assert result["ok"] and result["complete"] and result["tokens"] == manifest_of(out)["totals"]["tokens"]
    assert {"resolver", "api", "cdn"} <= set(result["hub_requests"]) and not any(result["hub_requests"].values())
    (artifact,) = (tmp_path / "artifacts" / "tokenize").glob("*.json")
    assert orjson.loads(artifact.read_bytes())["tokens"] == result["tokens"]
    assert invoke("tokenize", "--verify", "--out", str(out)).exit_code == 0
    shard = out / manifest_of(out)["shards"][1]["name"]
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    bad = invoke("tokenize", "--verify", "--out", str(out))
    assert bad.exit_code == 1 and shard.name in bad.stderr


@pytest.mark.parametrize("args, needle", [
    ((), "SRC is required"),
    (("--tokenizer", "byte", "--shard-tokens", "5"), "--shard-tokens must be"),
    (("--tokenizer", "/nope/tokenizer.json"), "does not exist"),
    (("--tokenizer", "byte", "--task", "1"), "--task and --tasks go together"),
    (("--tokenizer", "byte", "--task", "2", "--tasks", "2"), "--task must be an integer from 0 to 1"),
    (("other.jsonl", "--tokenizer", "byte"), "give one SRC, got 2"),
])
def test_usage_and_tokenizer_errors_are_one_line(tmp_path, source, args, needle):
    """Bad usage exits 2, an unloadable tokenizer 4; each error is one line saying what is wrong (its --json error
    message: the `fwe` process prints that as its one `error:` line, tests/cli/test_json_exit_paths.py, where typer
    would draw a panel)."""
    full = [str(source), *args] if args else ["--tokenizer", "byte"]
    got = cli(*full, "--out", str(tmp_path / "out"), "--json", tmp=tmp_path)
    code = 4 if "nope" in " ".join(args) else 2
    assert got.exit_code == code, got.stderr
    error = orjson.loads(got.stdout)["error"]
    assert needle in error["message"] and "\n" not in error["message"], error


def test_a_foreign_directory_is_refused(tmp_path, source):
    """--out naming a directory that holds other files (and no token manifest) is refused with exit 8."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    got = cli(str(source), "--tokenizer", "byte", "--out", str(out), tmp=tmp_path)
    assert got.exit_code == 8 and "not an fwe token output" in got.stderr
    assert (out / "notes.txt").read_text() == "mine"


def test_bootstrap_tokenize_writes_shards_of_the_staged_text(tmp_path):
    """`fwe bootstrap --tokenize byte` stages the text, then writes OUT/tokens/ whose documents are the staged
    parts' texts in order, each preceded by the end-of-text id (for bytes: UTF-8 bytes, eot 256)."""
    out = tmp_path / "b"
    got = invoke("bootstrap", "--source", "synthetic", "--gb", "0.0005", "--out", str(out), "--tokenize", "byte",
                 "--shard-tokens", "100000", "--json", "--artifacts-dir", str(tmp_path / "artifacts"))
    assert got.exit_code == 0, got.stderr
    result = orjson.loads(got.stdout)
    assert result["tokens"]["complete"] and result["tokens"]["output"] == str(out / "tokens")
    texts = [orjson.loads(line)["text"] for line in (out / "part-00000.jsonl").read_bytes().splitlines()]
    want = b"".join(b"\x00" + t.encode() for t in texts)
    manifest = manifest_of(out / "tokens")
    tokens = np.concatenate([read_shard(str(out / "tokens" / s["name"]))[0] for s in manifest["shards"]])
    assert tokens.dtype == np.uint16 and len(tokens) == len(want)
    assert (tokens == 256).sum() == len(texts)
    assert bytes(np.where(tokens == 256, 0, tokens).astype(np.uint8)) == want


def test_a_bucket_url_is_tokenized_as_the_same_file_on_disk(s3, tmp_path, source):
    """fwe tokenize s3://bucket/docs.jsonl: the shards of the same file on disk, the manifest's source the URL with
    each object's version; a re-run confirms the output, and one over a replaced object is refused naming the change
    (exit 8)."""
    import uuid

    bucket = f"fwe-{uuid.uuid4().hex[:12]}"
    s3.bucket(bucket)
    s3.put(bucket, "docs.jsonl", source.read_bytes())
    url = f"s3://{bucket}/docs.jsonl"
    remote, local = tmp_path / "remote", tmp_path / "local"
    for src, out in ((url, remote), (str(source), local)):
        done = cli(src, "--tokenizer", "byte", "--out", str(out), "--shard-tokens", "20000", tmp=tmp_path)
        assert done.exit_code == 0, done.stderr
    shards = [s["name"] for s in manifest_of(local)["shards"]]
    assert [s["name"] for s in manifest_of(remote)["shards"]] == shards and len(shards) > 1
    assert all((remote / name).read_bytes() == (local / name).read_bytes() for name in shards)
    recorded = manifest_of(remote)["source"]
    assert recorded["path"] == url and recorded["files"][0]["path"] == url and recorded["files"][0]["version"]
    assert cli(url, "--tokenizer", "byte", "--out", str(remote), "--shard-tokens", "20000",
               tmp=tmp_path).exit_code == 0
    s3.put(bucket, "docs.jsonl", source.read_bytes() + source.read_bytes())
    refused = cli(url, "--tokenizer", "byte", "--out", str(remote), "--shard-tokens", "20000", tmp=tmp_path)
    assert refused.exit_code == 8 and "the source changed since" in refused.stderr and url in refused.stderr

"""Damaged or changed inputs are refused by name: a resume state never continues over a file rewritten since, and a
token directory's recorded sizes and hashes are checked where it is cheap (always) or with --verify-parts."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import orjson
import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.files.token_shards import HEADER_BYTES, index_path
from tests.helpers import invoke, write_jsonl
from tests.loader.token_dirs import write_token_dir

SHAPE = ("--seq-len", "64", "--batch", "2")


def _smoke(*args: str, tmp: Path):
    return invoke("smoke", *SHAPE, "--artifacts-dir", str(tmp / "artifacts"), *args)


def test_a_local_file_rewritten_after_the_state_refuses_it_naming_the_file(tmp_path):
    """A state saved over docs.jsonl, then docs.jsonl rewritten (same size, a later modification time): resuming is
    a usage error (exit 2) in one line naming the file, not a read from a stale byte offset."""
    docs = write_jsonl(tmp_path / "docs.jsonl", [synthetic_record(1, i) for i in range(40)])
    state = tmp_path / "state.json"
    saved = _smoke("--local-path", str(docs), "--batches", "2", "--save-state", str(state), tmp=tmp_path)
    assert saved.exit_code == 0, saved.stderr
    before = docs.stat()
    docs.write_bytes(docs.read_bytes().replace(b"a", b"b"))  # same size, other documents
    os.utime(docs, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    resumed = _smoke("--local-path", str(docs), "--resume-state", str(state), tmp=tmp_path)
    assert resumed.exit_code == 2, resumed.stderr
    error = [line for line in resumed.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and str(docs.resolve()) in error[0] and "resume" in error[0]


def test_an_unchanged_file_still_resumes(tmp_path):
    """The same file, untouched: the saved state resumes (exit 0) — the check refuses changes, not resumes."""
    docs = write_jsonl(tmp_path / "docs.jsonl", [synthetic_record(1, i) for i in range(40)])
    state = tmp_path / "state.json"
    assert _smoke("--local-path", str(docs), "--batches", "2", "--save-state", str(state), tmp=tmp_path).exit_code == 0
    assert orjson.loads(state.read_bytes())["source_files"]["files"]["count"] == 1
    assert _smoke("--local-path", str(docs), "--resume-state", str(state), tmp=tmp_path).exit_code == 0


@pytest.fixture()
def token_dir(tmp_path) -> Path:
    return write_token_dir(tmp_path / "tokens", [synthetic_record(2, i)["text"] for i in range(60)], "byte", 30)


@pytest.mark.parametrize("verify", [False, True])
def test_a_reordered_document_index_is_refused_naming_the_shard(token_dir, tmp_path, verify):
    """Two offsets of a shard's index swapped (the file keeps its size): the loader refuses it naming the shard's
    index (exit 2), with or without --verify-parts, instead of serving a dropped document and two empty ones."""
    shard = token_dir / "fineweb_train_000000.bin"
    offsets = np.load(index_path(str(shard)))
    offsets[[3, 4]] = offsets[[4, 3]]
    np.save(index_path(str(shard)), offsets)
    result = _smoke("--local-path", str(token_dir), *(["--verify-parts"] if verify else []), tmp=tmp_path)
    assert result.exit_code == 2, result.stderr
    assert "fineweb_train_000000.idx.npy" in result.stderr


def test_a_shard_of_an_unknown_version_is_refused_naming_it(token_dir, tmp_path):
    """The second shard's header says version 7: the directory is refused as it opens (exit 2), naming that shard,
    not as a nameless format error once the stream reaches it (or never, in a short run)."""
    shard = token_dir / "fineweb_train_000001.bin"
    data = bytearray(shard.read_bytes())
    data[4:8] = (7).to_bytes(4, "little")
    shard.write_bytes(bytes(data))
    manifest = orjson.loads((token_dir / "manifest.json").read_bytes())  # the size still matches: only the version
    assert manifest["shards"][1]["bytes"] == len(data) and HEADER_BYTES < len(data)
    result = _smoke("--local-path", str(token_dir), tmp=tmp_path)
    assert result.exit_code == 2, result.stderr
    assert str(shard) in result.stderr and "version 7" in result.stderr


def test_a_torn_token_manifest_is_named_as_a_token_manifest(token_dir, tmp_path):
    """A token directory whose manifest.json was cut short is reported as a token manifest that cannot be read."""
    manifest = token_dir / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:40])
    result = _smoke("--local-path", str(token_dir), tmp=tmp_path)
    assert result.exit_code == 4, result.stderr
    assert f"cannot read token manifest {manifest}" in result.stderr and "bootstrap" not in result.stderr
